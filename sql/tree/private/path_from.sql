-- path_from: the path from the root to p_head_id, depth 0 first, as path
-- returns it: the segments of the live-path index when p_head_id is the
-- head (the path to a message never changes), else walked from the tree
-- (path_segments), each segment one index range scan. sibling_count comes
-- from the few siblings after the first (messages_forks_idx), read once
-- into an object by parent that each row looks up (as path does), counting,
-- when p_at is given, only those created by then: the "< 1/2 >" the
-- customer saw at that instant (sibling_index is creation order, so it holds).
CREATE OR REPLACE FUNCTION convo_private.path_from(p_conversation_id uuid, p_head_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int,
               incomplete boolean)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branches uuid[];
    v_depths   int[];
    v_forks    jsonb;  -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    IF p_head_id IS NULL THEN
        RETURN;
    END IF;
    IF p_head_id = (SELECT c.head_message_id FROM convo.conversations c WHERE c.id = p_conversation_id) THEN
        SELECT array_agg(l.branch_id), array_agg(l.max_depth) INTO v_branches, v_depths
          FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    ELSE
        SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_branches, v_depths
          FROM convo_private.path_segments(p_conversation_id, p_head_id) s;
    END IF;
    SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n) INTO v_forks
      FROM (SELECT f.parent_id, max(f.sibling_index) AS n
              FROM convo.messages f
             WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
               AND (p_at IS NULL OR f.created_at <= p_at)
             GROUP BY f.parent_id) f;
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END,
           m.incomplete
      FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
END;
$$;
