-- max_detail_bytes: the size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each);
-- larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_detail_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_detail_bytes() IS 'Size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each); larger input raises CV010.';
