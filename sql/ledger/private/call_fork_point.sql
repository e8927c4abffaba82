-- call_fork_point: the fork point record_tool_call gives a new call of
-- p_message_id: what fork_point_of's walk would find, taken from the
-- nearest message above with a recorded call when no person's turn lies
-- between (each call of an agent turn records the turn's fork point, and
-- only pgconvo writes those rows; self_check compares each with the walk,
-- ledger_problems). So the k calls of one agent turn cost a few steps each,
-- not a walk to the turn's start each.
CREATE OR REPLACE FUNCTION convo_private.call_fork_point(p_conversation_id uuid, p_message_id uuid)
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
    v_fork   uuid;
BEGIN
    WHILE v_id IS NOT NULL LOOP
        SELECT m.parent_id, m.role, m.parts INTO v_parent, v_role, v_parts
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
        IF v_role = 'user' AND EXISTS (SELECT 1 FROM jsonb_array_elements(v_parts) e (part)
                                        WHERE e.part ->> 'type' IS DISTINCT FROM 'tool_result') THEN
            RETURN v_parent;
        END IF;
        -- The message's calls, from its parts, each looked up by the
        -- ledger's key (a lateral LIMIT keeps it a key lookup, whatever a
        -- plan made on a nearly empty ledger would make of a join).
        SELECT f.fork_point_id INTO v_fork
          FROM jsonb_array_elements(v_parts) AS e (part)
         CROSS JOIN LATERAL (SELECT l.fork_point_id
                               FROM convo.tool_effect_calls l
                              WHERE l.conversation_id = p_conversation_id AND l.tool_call_id = e.part ->> 'id'
                              LIMIT 1) f
         WHERE e.part ->> 'type' = 'tool_use'
         LIMIT 1;
        IF FOUND THEN
            RETURN v_fork;
        END IF;
        v_id := v_parent;
    END LOOP;
    RETURN NULL;
END;
$$;
