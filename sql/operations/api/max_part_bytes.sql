-- max_part_bytes: the size cap on one message part (1 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_part_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 1048576;

COMMENT ON FUNCTION convo.max_part_bytes() IS 'Size cap in bytes on one message part (1 MiB of JSON); larger input raises CV010.';
