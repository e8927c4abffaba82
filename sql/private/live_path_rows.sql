-- live_path_rows: the live path of a conversation as path returns it, read
-- from the live-path index (one range scan of convo.live_path joined to the
-- messages), without an owner check: path and path_at check first. SQL, no
-- SET clause, so the planner inlines it into their queries.
CREATE OR REPLACE FUNCTION convo_private.live_path_rows(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT l.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           l.sibling_count
      FROM convo.live_path l
      JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
     WHERE l.conversation_id = p_conversation_id
     ORDER BY l.depth;
END;
