-- settle_effect: records the outside service's answer: pending to applied
-- (with its external reference) or failed (with an error code). An exact
-- repeat is a no-op; anything else on a settled effect raises CV006.
CREATE OR REPLACE FUNCTION convo.settle_effect(
    p_conversation_id uuid,
    p_effect_id       uuid,
    p_state           text,
    p_external_ref    text DEFAULT NULL,
    p_http_status     int DEFAULT NULL,
    p_error_code      text DEFAULT NULL,
    p_evidence        jsonb DEFAULT '{}')
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
    IF p_state IS NULL OR p_state NOT IN ('applied', 'failed') THEN
        RAISE EXCEPTION 'an effect settles as applied or failed, not %', coalesce(quote_literal(p_state), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_state = 'applied' AND (p_external_ref IS NULL OR p_external_ref = '' OR p_error_code IS NOT NULL) THEN
        RAISE EXCEPTION 'an applied effect needs p_external_ref and no error code'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_state = 'failed' AND (p_error_code IS NULL OR p_error_code = '' OR p_external_ref IS NOT NULL) THEN
        RAISE EXCEPTION 'a failed effect needs p_error_code and no external reference (put it in p_evidence)'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_http_status IS NOT NULL AND p_http_status NOT BETWEEN 100 AND 599 THEN
        RAISE EXCEPTION 'p_http_status % is not an HTTP status', p_http_status
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, effect %s', p_conversation_id, p_effect_id);
    END IF;
    IF p_evidence IS NULL THEN
        RAISE EXCEPTION 'p_evidence is required (''{}'' for none)'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, effect %s', p_conversation_id, p_effect_id);
    END IF;
    IF length(p_external_ref) > convo.max_ref_length() OR length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'an external reference or error code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('effect %s', p_effect_id);
    END IF;
    PERFORM convo_private.check_size('evidence', p_evidence, convo.max_detail_bytes());

    -- An exact repeat of a settlement is a no-op, also after the effect moved
    -- on (applied, then compensated: the settlement's columns stay as they
    -- were). A rejection or a decline was no settlement: settling one is CV006.
    -- Nested, so that settling a pending effect evaluates no query here.
    IF (v_effect.state = p_state OR (p_state = 'applied' AND v_effect.state = 'compensated'))
       AND v_effect.external_ref IS NOT DISTINCT FROM p_external_ref
       AND v_effect.http_status IS NOT DISTINCT FROM p_http_status
       AND v_effect.error_code IS NOT DISTINCT FROM p_error_code THEN
        IF EXISTS (SELECT 1 FROM convo.tool_effect_events ev
                    WHERE ev.conversation_id = p_conversation_id AND ev.effect_id = p_effect_id
                      AND ev.from_state = 'pending' AND ev.to_state = p_state) THEN
            RETURN;
        END IF;
    END IF;
    IF v_effect.state <> 'pending' THEN
        RAISE EXCEPTION 'effect % is %: only a pending effect settles', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, asked %s', p_effect_id, v_effect.state, p_state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = p_state, external_ref = p_external_ref, http_status = p_http_status,
           error_code = p_error_code, settled_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'pending', p_state, convo_private.caller(), p_evidence);
END;
$$;

COMMENT ON FUNCTION convo.settle_effect(uuid, uuid, text, text, int, text, jsonb) IS
    'Settle a pending effect: applied (with the external reference) or failed (with an error code); evidence is logged.';
