-- fork_point_of: the fork point of a tool call's message: the parent of the
-- nearest person's turn at or above it (a user message with a part other
-- than tool_result: messages that only carry tool results belong to the
-- agent loop). NULL stands for the conversation itself: that turn has no
-- parent, or there is no such turn.
CREATE OR REPLACE FUNCTION convo_private.fork_point_of(p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE up AS (
        SELECT m.id, m.parent_id, m.role, m.depth
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id
        UNION ALL
        SELECT p.id, p.parent_id, p.role, p.depth
          FROM up
          JOIN convo.messages p ON p.conversation_id = p_conversation_id AND p.id = up.parent_id
    )
    SELECT up.parent_id
      FROM up
     WHERE up.role = 'user'
       AND EXISTS (SELECT 1 FROM convo.message_parts pp
                    WHERE pp.conversation_id = p_conversation_id AND pp.message_id = up.id
                      AND pp.type <> 'tool_result')
     ORDER BY up.depth DESC
     LIMIT 1;
END;
