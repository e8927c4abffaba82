-- conversation_ref: the conversation row for a read, or CV002 when there is
-- none or the caller may not see it (sees_conversation: the one owner check
-- of a read; another owner's, or deleted to a caller that acts for its owner
-- alone). A read takes no lock: it sees one consistent snapshot.
CREATE OR REPLACE FUNCTION convo_private.conversation_ref(p_conversation_id uuid)
RETURNS convo.conversations
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_conversation convo.conversations;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011', DETAIL = 'conversation NULL';
    END IF;
    SELECT * INTO v_conversation FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF NOT FOUND OR NOT convo_private.sees_conversation(v_conversation.owner_id, v_conversation.deleted_at, false) THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_conversation;
END;
$$;
