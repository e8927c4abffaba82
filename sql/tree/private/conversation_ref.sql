-- conversation_ref: the conversation row for a read, or CV002 when there is
-- none, the caller may not see its owner (sees_owner: the one owner check
-- of a read) or it is deleted and the caller acts for its owner alone
-- (sees_deleted). A read takes no lock: it sees one consistent snapshot.
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
    IF NOT FOUND OR NOT convo_private.sees_owner(v_conversation.owner_id)
       OR (v_conversation.deleted_at IS NOT NULL AND NOT convo_private.sees_deleted(false)) THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_conversation;
END;
$$;
