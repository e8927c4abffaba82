-- move_head_to: moves the head and lets log_head_move record why and by whom
-- (through transaction-local settings, cleared again at once so a later
-- direct UPDATE in the same transaction is logged as 'direct_update').
-- Moving the head to where it already is writes nothing.
CREATE OR REPLACE FUNCTION convo_private.move_head_to(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_reason          text,
    p_moved_by        text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('convo.head_reason', p_reason, true);
    PERFORM set_config('convo.head_moved_by', coalesce(p_moved_by, ''), true);
    UPDATE convo.conversations c
       SET head_message_id = p_message_id
     WHERE c.id = p_conversation_id
       AND c.head_message_id IS DISTINCT FROM p_message_id;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
END;
$$;
