-- rebuild_live_path: rebuilds convo.live_path for one conversation from the
-- tree and its head, which stay the truth: the repair for self_check's
-- live_path_index check (and what the migration that made the segments ran).
CREATE OR REPLACE FUNCTION convo_private.rebuild_live_path(p_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    PERFORM convo_private.move_live_path(p_conversation_id,
        (SELECT c.head_message_id FROM convo.conversations c WHERE c.id = p_conversation_id));
END;
$$;
