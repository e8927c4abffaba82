-- lock_conversation: takes the conversation's row lock (FOR NO KEY UPDATE),
-- which every write to a conversation takes first, so writes to one
-- conversation serialize; returns the current head. CV002 if it does not
-- exist or the caller may not write for its owner (writes_owner: the one
-- owner check of a write).
CREATE OR REPLACE FUNCTION convo_private.lock_conversation(p_conversation_id uuid)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head  uuid;
    v_owner text;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011', DETAIL = 'conversation NULL';
    END IF;
    SELECT c.head_message_id, c.owner_id INTO v_head, v_owner
      FROM convo.conversations c
     WHERE c.id = p_conversation_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT convo_private.writes_owner(v_owner) THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_head;
END;
$$;
