-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. The live-path index (convo.live_path: one row per branch the
-- path runs through, kept by every head move) gives the segments, and the
-- messages of each are one index range scan of messages_branch_key (a
-- conversation never edited is one segment: one range scan, as a flat list
-- is). Sibling counts come from the few later siblings (messages_forks_idx),
-- read once into an object by parent that each row looks up (a conversation
-- never edited has none and looks nothing up): no probe and no join per
-- message, whatever the plan. CV002 for an unknown conversation; empty
-- before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_forks jsonb;  -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n) INTO v_forks
      FROM (SELECT f.parent_id, max(f.sibling_index) AS n
              FROM convo.messages f
             WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
             GROUP BY f.parent_id) f;
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
      FROM convo.live_path s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     WHERE s.conversation_id = p_conversation_id
     ORDER BY m.depth;
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';
