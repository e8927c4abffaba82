-- max_detail_bytes: the size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_detail_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_detail_bytes() IS 'Size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each); larger input raises CV010.';
