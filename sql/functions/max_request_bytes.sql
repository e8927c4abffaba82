-- max_request_bytes: the size cap on the request or arguments of a receipt (256 KiB of JSON);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_request_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_request_bytes() IS 'Size cap on the request or arguments of a receipt (256 KiB of JSON); larger input raises CV010.';
