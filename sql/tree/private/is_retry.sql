-- is_retry: recognises a retried write by its client-supplied message id,
-- before any other check. False when the id is new; true when the stored
-- message is the same request (role, parts as jsonb text, so 500 and 500.0
-- differ, and, if asked, parent): the caller
-- then returns the first result and writes nothing. CV009 when it differs.
CREATE OR REPLACE FUNCTION convo_private.is_retry(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_role            text,
    p_parts           jsonb,
    p_parent_id       uuid,
    p_match_parent    boolean)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_message_id IS NULL THEN
        RETURN false;
    END IF;
    SELECT * INTO v_message FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_message.role IS DISTINCT FROM p_role
       OR (p_match_parent AND v_message.parent_id IS DISTINCT FROM p_parent_id)
       OR v_message.parts::text IS DISTINCT FROM p_parts::text THEN
        RAISE EXCEPTION 'message id % is already used for a different message', p_message_id
            USING ERRCODE = 'CV009',
                  DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id),
                  HINT = 'A retry must repeat the first call exactly; a new message needs a new id.';
    END IF;
    RETURN true;
END;
$$;
