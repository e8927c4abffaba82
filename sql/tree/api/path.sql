-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. One statement (each part of it filtered by the argument, so
-- that on a distributed database it reads the node it runs on) checks the owner (sees_conversation:
-- CV002 otherwise, through conversation_ref) and reads the live-path index (convo.live_path:
-- one row per branch the path runs through, kept by every head move) and
-- the sibling counts (the few later siblings, messages_forks_idx, as one
-- object by parent that each row looks up); a second reads the messages: a
-- conversation never edited is one segment, one range scan of
-- messages_branch_key in depth order, as a flat list is; an edited one a
-- range scan per segment. No probe and no join per message, whatever the
-- plan. Empty before the first message. incomplete marks an answer cut
-- short (a stopped or failed generation's, kept by cancel_generation or
-- fail_generation with its parts).
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int,
               incomplete boolean)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_seen     boolean;
    v_branches uuid[];  -- the segments, root first: each branch
    v_depths   int[];   -- and the deepest of it on the path
    v_forks    jsonb;   -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    SELECT true,
           (SELECT array_agg(l.branch_id ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id),
           (SELECT array_agg(l.max_depth ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id),
           (SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n)
              FROM (SELECT f.parent_id, max(f.sibling_index) AS n
                      FROM convo.messages f
                     WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
                     GROUP BY f.parent_id) f)
      INTO v_seen, v_branches, v_depths, v_forks
      FROM convo.conversations c
     WHERE c.id = p_conversation_id AND convo_private.sees_conversation(c.owner_id, c.deleted_at, false);
    IF v_seen IS NULL THEN
        PERFORM convo_private.conversation_ref(p_conversation_id); -- CV011 or CV002
    END IF;
    IF cardinality(v_branches) = 1 THEN
        RETURN QUERY
        SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
               CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END,
               m.incomplete
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.branch_id = v_branches[1] AND m.depth <= v_depths[1]
         ORDER BY m.depth;
    ELSIF cardinality(v_branches) > 1 THEN
        RETURN QUERY
        SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
               CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END,
               m.incomplete
          FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
          JOIN convo.messages m
            ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
         ORDER BY m.depth;
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';
