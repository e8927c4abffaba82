-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet. When nothing on the live path changed after p_at
-- (the head then is the head now, and no live_path row is newer), that path
-- is the live-path index, read as path reads it; otherwise it is walked from
-- the tree (path_from).
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid := convo.head_at(p_conversation_id, p_at);
BEGIN
    IF v_head IS NOT DISTINCT FROM (convo_private.conversation_ref(p_conversation_id)).head_message_id
       AND NOT EXISTS (SELECT 1 FROM convo.live_path l
                        WHERE l.conversation_id = p_conversation_id AND l.since > p_at) THEN
        RETURN QUERY SELECT * FROM convo_private.live_path_rows(p_conversation_id);
    ELSE
        RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, v_head, p_at);
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';
