-- max_tool_input_bytes: the size cap on one tool_use input (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_tool_input_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_tool_input_bytes() IS 'Size cap in bytes on one tool_use input (256 KiB of JSON); larger input raises CV010.';
