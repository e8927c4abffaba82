-- max_message_bytes: the size cap on the parts of a whole message (4 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_message_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 4194304;

COMMENT ON FUNCTION convo.max_message_bytes() IS 'Size cap in bytes on the parts of a whole message (4 MiB of JSON); larger input raises CV010.';
