-- rebuild_live_path: rebuilds convo.live_path for one conversation from the
-- tree and its head, which stay the truth (path_from, one index range scan
-- per branch point). The migration that made the index fills it with this,
-- and it is the repair for self_check's live_path check.
CREATE OR REPLACE FUNCTION convo_private.rebuild_live_path(p_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    INSERT INTO convo.live_path (conversation_id, depth, message_id, sibling_count)
    SELECT p_conversation_id, p.depth, p.message_id, p.sibling_count
      FROM convo.conversations c,
           convo_private.path_from(c.id, c.head_message_id, NULL) p
     WHERE c.id = p_conversation_id;
END;
$$;
