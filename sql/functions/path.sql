-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. The live-path index (convo.live_path: one row per branch the
-- path runs through, kept by every head move) gives the segments, and the
-- messages of each are one index range scan of messages_branch_key (a
-- conversation never edited is one segment: one range scan, as a flat list
-- is); sibling counts come from the few later siblings (messages_forks_idx).
-- No probe per message. CV002 for an unknown conversation; empty before the
-- first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN m.parent_id IS NULL
                THEN (SELECT r.sibling_index FROM convo.messages r
                       WHERE r.conversation_id = p_conversation_id AND r.parent_id IS NULL
                       ORDER BY r.parent_id DESC, r.sibling_index DESC LIMIT 1)
                ELSE coalesce(f.n, 1) END
      FROM convo.live_path s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
      LEFT JOIN (SELECT f.parent_id, max(f.sibling_index) AS n
                   FROM convo.messages f
                  WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
                  GROUP BY f.parent_id) f
        ON f.parent_id = m.parent_id
     WHERE s.conversation_id = p_conversation_id
     ORDER BY m.depth;
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';
