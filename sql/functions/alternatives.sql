-- alternatives: a message and its siblings, oldest first ("you previously
-- asked ..."): whether each is on the live path, and the most recently
-- created leaf below it, to switch to with move_head.
CREATE OR REPLACE FUNCTION convo.alternatives(p_conversation_id uuid, p_message_id uuid)
RETURNS TABLE (message_id uuid, branch_reason text, created_at timestamptz, on_head_path boolean,
               latest_leaf_id uuid)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head    uuid := (convo_private.conversation_ref(p_conversation_id)).head_message_id;
    v_message convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
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
    )
    SELECT s.id, s.branch_reason, s.created_at,
           convo_private.is_on_path(p_conversation_id, s.id, v_head),
           (SELECT b.id FROM below b
             WHERE b.sibling_id = s.id
               AND NOT EXISTS (SELECT 1 FROM convo.messages c
                                WHERE c.conversation_id = p_conversation_id AND c.parent_id = b.id)
             ORDER BY b.created_at DESC, b.id DESC
             LIMIT 1)
      FROM siblings s
     ORDER BY s.sibling_index;
END;
$$;

COMMENT ON FUNCTION convo.alternatives(uuid, uuid) IS
    'A message and its siblings, oldest first: whether each is on the live path, and its most recent leaf.';
