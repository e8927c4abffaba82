-- generation_stale_after: how long a generation may stream before
-- stale_generations lists it.
CREATE OR REPLACE FUNCTION convo.generation_stale_after()
RETURNS interval
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN interval '10 minutes';

COMMENT ON FUNCTION convo.generation_stale_after() IS 'How long a generation may stream before it is stale (10 minutes).';
