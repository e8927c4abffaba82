-- alternatives: a message and its siblings, oldest first ("you previously
-- asked ..."): whether each is on the live path, and the most recently
-- created leaf below it, to switch to with move_head. One pass over the
-- siblings' subtrees, and the path walked once, whatever the sibling count.
CREATE OR REPLACE FUNCTION convo.alternatives(p_conversation_id uuid, p_message_id uuid)
RETURNS TABLE (message_id uuid, branch_reason text, created_at timestamptz, on_head_path boolean,
               latest_leaf_id uuid)
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
    v_head    uuid := (convo_private.conversation_ref(p_conversation_id)).head_message_id;
    v_message convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
    -- The one sibling on the path: the path's message at the siblings' depth.
    v_on_path uuid := (SELECT m.id FROM convo_private.path_segments(p_conversation_id, v_head) s
                         JOIN convo.messages m ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id
                        WHERE m.depth = v_message.depth AND m.depth <= s.max_depth
                        LIMIT 1);
BEGIN
    RETURN QUERY
    WITH RECURSIVE siblings AS (
        SELECT s.id, s.branch_reason, s.created_at, s.sibling_index
          FROM convo.messages s
         WHERE s.conversation_id = p_conversation_id
           AND s.parent_id IS NOT DISTINCT FROM v_message.parent_id
    ), below (sibling_id, id, created_at) AS (
        SELECT s.id, s.id, s.created_at FROM siblings s
        UNION ALL
        SELECT b.sibling_id, c.id, c.created_at
          FROM below b
          JOIN convo.messages c ON c.conversation_id = p_conversation_id AND c.parent_id = b.id
    ), latest_leaf AS (
        SELECT DISTINCT ON (b.sibling_id) b.sibling_id, b.id
          FROM below b
         WHERE NOT EXISTS (SELECT 1 FROM convo.messages c
                            WHERE c.conversation_id = p_conversation_id AND c.parent_id = b.id)
         ORDER BY b.sibling_id, b.created_at DESC, b.id DESC
    )
    SELECT s.id, s.branch_reason, s.created_at, s.id IS NOT DISTINCT FROM v_on_path, l.id
      FROM siblings s
      LEFT JOIN latest_leaf l ON l.sibling_id = s.id
     ORDER BY s.sibling_index;
END;
$$;

COMMENT ON FUNCTION convo.alternatives(uuid, uuid) IS
    'A message and its siblings, oldest first: whether each is on the live path, and its most recent leaf.';
