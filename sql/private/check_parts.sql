-- check_parts: the checks on a message's parts as a whole (present, a
-- non-empty array, under the message cap), with the contract's SQLSTATEs;
-- each part is checked by message_parts_check.
CREATE OR REPLACE FUNCTION convo_private.check_parts(p_parts jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011';
    END IF;
    IF jsonb_typeof(p_parts) <> 'array' THEN
        RAISE EXCEPTION 'p_parts must be a JSON array, not %', jsonb_typeof(p_parts) USING ERRCODE = 'CV008';
    END IF;
    IF jsonb_array_length(p_parts) = 0 THEN
        RAISE EXCEPTION 'p_parts must not be empty' USING ERRCODE = 'CV008';
    END IF;
    IF octet_length(p_parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'a message is larger than % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s bytes', octet_length(p_parts::text));
    END IF;
END;
$$;
