-- max_metadata_bytes: the size cap on conversation metadata (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_metadata_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_metadata_bytes() IS 'Size cap in bytes on conversation metadata (256 KiB of JSON); larger input raises CV010.';
