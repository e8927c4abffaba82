-- stale_generations_in: the rows of stale_generations_rows read from the
-- relations named: convo.generations and convo.conversations on one server; on
-- a distributed database, one node's shards of them that hold the same
-- conversations (stale_generations_on_node).
CREATE OR REPLACE FUNCTION convo_private.stale_generations_in(p_generations text, p_conversations text)
RETURNS TABLE (conversation_id uuid, generation_id uuid, model text, prompt_message_id uuid, started_at timestamptz)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('
    SELECT g.conversation_id, g.id, g.model, g.prompt_message_id, g.started_at
      FROM %1$s g
      JOIN %2$s c ON c.id = g.conversation_id
     WHERE g.state = ''streaming''
       AND g.started_at < clock_timestamp() - convo.generation_stale_after()
       AND convo_private.sees_conversation(c.owner_id, c.deleted_at, false)', p_generations, p_conversations);
END;
$$;
