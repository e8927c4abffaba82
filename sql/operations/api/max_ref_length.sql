-- max_ref_length: the size cap on an external reference, result reference or error code (characters);
-- larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_ref_length()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 1024;

COMMENT ON FUNCTION convo.max_ref_length() IS 'Size cap on an external reference, result reference or error code (characters); larger input raises CV010.';
