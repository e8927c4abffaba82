-- effect_event: one transition of an effect, in the transaction that made
-- it: its row of tool_effect_events (seq numbered per conversation, under
-- the conversation's lock; the actor and evidence the caller names) and
-- the convo_effect notification (when notifies says so; the payload
-- holds ids, seq and states only, never arguments, evidence, references,
-- error codes or the actor: LISTEN is not owner-scoped). Every transition
-- pgconvo makes writes it (record_tool_call for a new effect, settle,
-- compensate, confirm, decline), and tool_effects_log_direct for one made
-- outside the API, by the caller.
CREATE OR REPLACE FUNCTION convo_private.effect_event(
    p_conversation_id uuid,
    p_effect_id       uuid,
    p_from            text,
    p_to              text,
    p_actor           text,
    p_evidence        jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq bigint;
BEGIN
    v_seq := coalesce((SELECT v.seq FROM convo.tool_effect_events v
                        WHERE v.conversation_id = p_conversation_id ORDER BY v.seq DESC LIMIT 1), 0) + 1;
    INSERT INTO convo.tool_effect_events (conversation_id, seq, effect_id, from_state, to_state, actor, evidence)
    VALUES (p_conversation_id, v_seq, p_effect_id, p_from, p_to, p_actor, p_evidence);
    IF convo_private.notifies() THEN
        PERFORM pg_notify('convo_effect', json_build_object(
            'kind', 'effect', 'conversation_id', p_conversation_id, 'effect_id', p_effect_id,
            'seq', v_seq, 'from_state', p_from, 'state', p_to)::text);
    END IF;
END;
$$;
