-- max_message_bytes: the size cap on the parts of a whole message (4 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_message_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 4194304;

COMMENT ON FUNCTION convo.max_message_bytes() IS 'Size cap in bytes on the parts of a whole message (4 MiB of JSON); larger input raises CV010.';
