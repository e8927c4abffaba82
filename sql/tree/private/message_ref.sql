-- message_ref: the message a call names, in the conversation it names.
-- A message of another conversation is CV003, no such message CV002.
CREATE OR REPLACE FUNCTION convo_private.message_ref(p_conversation_id uuid, p_message_id uuid)
RETURNS convo.messages
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_message_id IS NULL THEN
        RAISE EXCEPTION 'a message id is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_message FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id;
    IF FOUND THEN
        RETURN v_message;
    END IF;
    PERFORM convo_private.raise_not_found('message', p_message_id::text, p_conversation_id,
        convo_private.other_conversation(p_conversation_id, 'convo.messages', 'id', p_message_id::text));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;
