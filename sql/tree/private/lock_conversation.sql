-- lock_conversation: takes the conversation's row lock (FOR NO KEY UPDATE),
-- which every write to a conversation takes first, so writes to one
-- conversation serialize; returns the current head. CV002 if it does not
-- exist or the caller may not write it (sees_conversation: the one owner
-- check of a write; another owner's, or deleted to a caller that writes for
-- its owner alone). The owner check is a condition of the locking
-- statement, so a row the caller may not write is never locked or waited
-- for: another owner's lock can neither delay a call nor be timed.
CREATE OR REPLACE FUNCTION convo_private.lock_conversation(p_conversation_id uuid)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011', DETAIL = 'conversation NULL';
    END IF;
    SELECT c.head_message_id INTO v_head
      FROM convo.conversations c
     WHERE c.id = p_conversation_id AND convo_private.sees_conversation(c.owner_id, c.deleted_at, true)
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_head;
END;
$$;
