-- max_ref_length: the size cap on an external reference, result reference or error code (characters);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_ref_length()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 1024;

COMMENT ON FUNCTION convo.max_ref_length() IS 'Size cap on an external reference, result reference or error code (characters); larger input raises CV010.';
