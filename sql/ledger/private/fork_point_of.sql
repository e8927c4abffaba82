-- fork_point_of: the fork point of a tool call's message: the parent of the
-- nearest person's turn at or above it (a user message with a part other
-- than tool_result: messages that only carry tool results belong to the
-- agent loop). NULL stands for the conversation itself: that turn has no
-- parent, or there is no such turn. A walk up that stops at that turn, so
-- it costs the length of the agent's turn, not the depth of the conversation.
CREATE OR REPLACE FUNCTION convo_private.fork_point_of(p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id     uuid := p_message_id;
    v_parent uuid;
    v_role   text;
    v_parts  jsonb;
BEGIN
    WHILE v_id IS NOT NULL LOOP
        SELECT m.parent_id, m.role, m.parts INTO v_parent, v_role, v_parts
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
        IF v_role = 'user' AND EXISTS (SELECT 1 FROM jsonb_array_elements(v_parts) e (part)
                                        WHERE e.part ->> 'type' IS DISTINCT FROM 'tool_result') THEN
            RETURN v_parent;
        END IF;
        v_id := v_parent;
    END LOOP;
    RETURN NULL;
END;
$$;
