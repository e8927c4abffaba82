-- stale_pending_effects_in: the rows of stale_pending_effects_rows read from the
-- relations named: convo.tool_effects and convo.conversations on one server; on
-- a distributed database, one node's shards of them that hold the same
-- conversations (stale_pending_effects_on_node).
CREATE OR REPLACE FUNCTION convo_private.stale_pending_effects_in(p_tool_effects text, p_conversations text)
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, state text, idempotency_key text,
               requested_at timestamptz, deadline_at timestamptz)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('
    SELECT e.conversation_id, e.id, e.tool_name, e.state, e.idempotency_key, e.requested_at, e.deadline_at
      FROM %1$s e
      JOIN %2$s c ON c.id = e.conversation_id
     WHERE e.state IN (''pending'', ''awaiting_confirmation'')
       AND e.deadline_at < clock_timestamp()
       AND convo_private.sees_owner(c.owner_id)', p_tool_effects, p_conversations);
END;
$$;
