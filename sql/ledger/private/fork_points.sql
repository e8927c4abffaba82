-- fork_points: the fork point of every message of one conversation, as
-- fork_point_of gives it for each (the parent of the nearest person's turn
-- at or above it; NULL for the conversation), computed in one walk down the
-- tree: a message's is its parent's unless it is a person's turn itself.
-- ledger_problems checks each recorded fork point against it without
-- trusting any: a walk up from each call would cost an agent turn of k
-- calls k times its length. Each step looks the children up by key
-- (messages_sibling_key): a subquery the planner keeps (OFFSET 0), since
-- a join let it scan the conversation once for each step (a hash join
-- planned for a work table of a few rows): quadratic. PL/pgSQL, so its plan
-- is cached.
CREATE OR REPLACE FUNCTION convo_private.fork_points(p_conversation_id uuid)
RETURNS TABLE (message_id uuid, fork uuid)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE walk (id, fork) AS (
        SELECT m.id, NULL::uuid
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.parent_id IS NULL
        UNION ALL
        SELECT m.id,
               CASE WHEN m.role = 'user' AND EXISTS (SELECT 1 FROM jsonb_array_elements(m.parts) e (part)
                                                      WHERE e.part ->> 'type' IS DISTINCT FROM 'tool_result')
                    THEN m.parent_id ELSE w.fork END
          FROM walk w
         CROSS JOIN LATERAL (SELECT c.id, c.parent_id, c.role, c.parts FROM convo.messages c
                              WHERE c.conversation_id = p_conversation_id AND c.parent_id = w.id
                             OFFSET 0) m
    )
    SELECT w.id, w.fork FROM walk w;
END;
$$;
