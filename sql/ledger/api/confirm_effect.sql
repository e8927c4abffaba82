-- confirm_effect: a person confirms a held re-run: awaiting_confirmation to
-- pending, under a key of its own that names the re-run and the effect it
-- repeats (so the outside service sees a new request), its deadline
-- starting now. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.confirm_effect(p_conversation_id uuid, p_effect_id uuid, p_confirmed_by text)
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
    v_effect   convo.tool_effects;
    v_now      timestamptz;
    v_deadline interval;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_confirmed_by IS NULL OR p_confirmed_by = '' THEN
        RAISE EXCEPTION 'p_confirmed_by is required' USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF v_effect.confirmed_by = p_confirmed_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'awaiting_confirmation' THEN
        RAISE EXCEPTION 'effect % is %: only an effect awaiting confirmation is confirmed', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, confirmed_by %s', p_effect_id, v_effect.state, v_effect.confirmed_by);
    END IF;
    v_now := clock_timestamp();
    SELECT t.deadline INTO v_deadline FROM convo.tools t
     WHERE t.name = v_effect.tool_name AND t.version = v_effect.tool_version;
    UPDATE convo.tool_effects e
       SET state = 'pending',
           idempotency_key = 'rerun:' || e.id || ':of:' || e.repeats_effect_id,
           confirmed_by = p_confirmed_by,
           confirmed_at = v_now,
           deadline_at = v_now + v_deadline
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'awaiting_confirmation', 'pending', p_confirmed_by, '{}');
END;
$$;

COMMENT ON FUNCTION convo.confirm_effect(uuid, uuid, text) IS
    'Confirm a held re-run: awaiting_confirmation to pending under a key of its own naming the effect it repeats.';
