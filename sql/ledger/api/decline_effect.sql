-- decline_effect: a person declines a held re-run: awaiting_confirmation to
-- failed with error code 'declined'; who declined is in the event log. An
-- exact repeat (same person) is a no-op.
CREATE OR REPLACE FUNCTION convo.decline_effect(p_conversation_id uuid, p_effect_id uuid, p_declined_by text)
RETURNS void
LANGUAGE plpgsql
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
    v_effect convo.tool_effects;
    v_now    timestamptz;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_declined_by IS NULL OR p_declined_by = '' THEN
        RAISE EXCEPTION 'p_declined_by is required' USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF v_effect.state = 'failed' AND v_effect.error_code = 'declined'
       AND (SELECT ev.actor FROM convo.tool_effect_events ev
             WHERE ev.conversation_id = p_conversation_id AND ev.effect_id = p_effect_id AND ev.to_state = 'failed'
             ORDER BY ev.seq DESC LIMIT 1) = p_declined_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'awaiting_confirmation' THEN
        RAISE EXCEPTION 'effect % is %: only an effect awaiting confirmation is declined', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s', p_effect_id, v_effect.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = 'failed', error_code = 'declined', settled_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'awaiting_confirmation', 'failed', p_declined_by, '{}');
END;
$$;

COMMENT ON FUNCTION convo.decline_effect(uuid, uuid, text) IS
    'Decline a held re-run: awaiting_confirmation to failed, error_code declined.';
