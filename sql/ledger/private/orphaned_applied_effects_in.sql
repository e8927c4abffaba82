-- orphaned_applied_effects_in: the rows of orphaned_applied_effects_rows
-- read from the relations named: convo.tool_effects, convo.conversations,
-- convo.tool_effect_calls and convo.messages on one server; on a
-- distributed database, one node's shards of them that hold the same
-- conversations (view_rows_on_node), where its recursive walk of a
-- conversation's branches reads plain tables.
CREATE OR REPLACE FUNCTION convo_private.orphaned_applied_effects_in(
    p_tool_effects      text,
    p_conversations     text,
    p_tool_effect_calls text,
    p_messages          text)
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, external_ref text, amount_minor bigint,
               currency char(3), settled_at timestamptz, tool_call_ids text[])
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('
    SELECT e.conversation_id, e.id, e.tool_name, e.external_ref, e.amount_minor, e.currency, e.settled_at,
           ARRAY(SELECT l.tool_call_id FROM %3$s l
                  WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
                  ORDER BY l.decided_at)
      FROM %1$s e
      JOIN %2$s c ON c.id = e.conversation_id
     WHERE e.state = ''applied''
       AND convo_private.sees_owner(c.owner_id)
       AND NOT EXISTS (
            WITH RECURSIVE segments (branch_id, max_depth) AS (
                SELECT h.branch_id, h.depth
                  FROM %4$s h
                 WHERE h.conversation_id = c.id AND h.id = c.head_message_id
                UNION ALL
                SELECT fork.branch_id, fork.depth
                  FROM segments s
                  JOIN %4$s start ON start.conversation_id = c.id AND start.id = s.branch_id
                  JOIN %4$s fork ON fork.conversation_id = c.id AND fork.id = start.parent_id
            )
            SELECT 1
              FROM %3$s l
              JOIN %4$s m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
              JOIN segments s ON s.branch_id = m.branch_id AND m.depth <= s.max_depth
             WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id)', p_tool_effects, p_conversations, p_tool_effect_calls, p_messages);
END;
$$;
