-- is_on_path: whether a message sits on the path from the root to p_head_id
-- (is the head or one of its ancestors), by the same branch walk as path.
CREATE OR REPLACE FUNCTION convo_private.is_on_path(p_conversation_id uuid, p_message_id uuid, p_head_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1
          FROM convo_private.path_segments(p_conversation_id, p_head_id) s
          JOIN convo.messages m
            ON m.conversation_id = p_conversation_id AND m.id = p_message_id
         WHERE m.branch_id = s.branch_id AND m.depth <= s.max_depth);
END;
$$;
