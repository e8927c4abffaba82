-- check_parts: the checks on a message's parts as a whole (present, a
-- non-empty array, under the message cap), with the contract's SQLSTATEs;
-- each part is checked by message_parts_check. p_where names where the
-- message was going (its conversation and parent), never the new message's
-- own id, which is not stored when its parts are refused.
CREATE OR REPLACE FUNCTION convo_private.check_parts(p_parts jsonb, p_where text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011', DETAIL = p_where;
    END IF;
    IF jsonb_typeof(p_parts) <> 'array' THEN
        RAISE EXCEPTION 'p_parts must be a JSON array, not %', jsonb_typeof(p_parts) USING ERRCODE = 'CV008', DETAIL = p_where;
    END IF;
    IF jsonb_array_length(p_parts) = 0 THEN
        RAISE EXCEPTION 'p_parts must not be empty' USING ERRCODE = 'CV008', DETAIL = p_where;
    END IF;
    IF octet_length(p_parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'a message is larger than % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', p_where, octet_length(p_parts::text));
    END IF;
END;
$$;
