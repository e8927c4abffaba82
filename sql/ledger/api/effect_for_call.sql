-- effect_for_call: what the agent loop must do for a tool call, read from the
-- ledger decision written when the call was appended: execute (send with
-- idempotency_key), reuse (take the existing outcome), confirm (ask a
-- person), rejected, or replay (a registered tool without effects). A call
-- of a tool that was not registered then is CV007, whatever came after.
CREATE OR REPLACE FUNCTION convo.effect_for_call(p_conversation_id uuid, p_tool_call_id text)
RETURNS TABLE (effect_id uuid, decision text, state text, idempotency_key text, external_ref text,
               http_status int, error_code text)
LANGUAGE plpgsql
STABLE
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
    v_tool_name text;
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    -- The decision first (a call's row implies its part: a foreign key);
    -- without one, why not.
    RETURN QUERY
    SELECT e.id, l.decision, e.state, e.idempotency_key, e.external_ref, e.http_status, e.error_code
      FROM convo.tool_effect_calls l
      LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
     WHERE l.conversation_id = p_conversation_id AND l.tool_call_id = p_tool_call_id;
    IF FOUND THEN
        RETURN;
    END IF;
    IF p_tool_call_id IS NULL THEN
        RAISE EXCEPTION 'p_tool_call_id is required' USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT p.tool_name INTO v_tool_name FROM convo.keyed_parts p
     WHERE p.conversation_id = p_conversation_id AND p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id;
    IF NOT FOUND THEN
        PERFORM convo_private.raise_not_found('tool call', p_tool_call_id, p_conversation_id,
            convo_private.other_conversation(p_conversation_id, 'convo.keyed_parts', 'tool_call_id', p_tool_call_id,
                                             'type = ''tool_use'''));
    END IF;
    RAISE EXCEPTION 'tool % of call % was not on the allowlist when the call was appended',
            v_tool_name, p_tool_call_id
        USING ERRCODE = 'CV007',
              DETAIL = format('tool %s, tool call %s, conversation %s', v_tool_name, p_tool_call_id, p_conversation_id),
              HINT = 'An unregistered tool never gets a go-ahead; register it, then append a new call.';
END;
$$;

COMMENT ON FUNCTION convo.effect_for_call(uuid, text) IS
    'What the agent loop must do for a tool call: execute, reuse, confirm, rejected or replay (CV007 for an unregistered tool).';
