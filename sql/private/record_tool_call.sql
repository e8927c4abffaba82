-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment, which the call's row names (so the
-- decision can be checked against it). An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered), and neither
-- does a call an import is writing (is_import): the imports from other
-- products write none, that history happened elsewhere; import_conversation
-- writes its exported ledger rows itself.
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key: the call is linked to it.
--   confirm:  a re-run (same tool, same fork point, an earlier call on another
--             branch) under a new key: held in awaiting_confirmation.
--   execute:  a new pending effect under the scope key.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Planned afresh for each call: a message of N calls grows the ledger
-- within one statement, and a plan cached while the tables were nearly
-- empty (a sequential scan) would make each call cost the calls before it.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := NEW.body -> 'input';
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
    v_effect    convo.tool_effects;
    v_repeats   uuid;
    v_decision  text;
    v_money     record;
BEGIN
    IF convo_private.is_import(NEW.conversation_id) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = NEW.tool_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_fork := convo_private.fork_point_of(NEW.conversation_id, NEW.message_id);
    v_errors := CASE WHEN v_tool.effectful THEN convo.args_errors(v_tool.args_schema, v_input) END;
    IF NOT v_tool.effectful THEN
        v_decision := 'replay';
    ELSIF cardinality(v_errors) > 0 THEN
        -- Rejected calls never deduplicate: the key is the call's own.
        v_decision := 'rejected';
        v_scope_key := convo_private.scope_key('rejected', NEW.conversation_id, NEW.tool_call_id, NULL, NULL, NULL);
    ELSE
        v_scope_key := convo_private.scope_key(v_tool.idempotency_scope, NEW.conversation_id, NEW.tool_call_id,
                                               v_fork, v_tool.name, v_input);
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = NEW.conversation_id AND e.scope_key = v_scope_key;
        IF FOUND THEN
            v_decision := 'reuse';
        ELSE
            -- Re-run candidates come from other messages at the same fork point
            -- (the calls of this very message are on its path by definition):
            -- two ranges of tool_effect_calls_fork_idx skip this message's
            -- calls, so N calls in one message cost N lookups, not N squared.
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = NEW.conversation_id
               AND (l.fork_point_id = v_fork OR (v_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < NEW.message_id OR l.message_id > NEW.message_id)
               AND e.tool_name = NEW.tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_path(NEW.conversation_id, l.message_id, NEW.message_id)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        SELECT * INTO v_money FROM convo_private.effect_money(v_input, v_tool.amount_arg, v_tool.currency_arg);
        PERFORM convo_private.set_effect_context(NULL, CASE WHEN v_decision = 'rejected'
                                                    THEN jsonb_build_object('errors', to_jsonb(v_errors)) END);
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, deadline_at, settled_at, http_status, error_code)
        VALUES
            (NEW.conversation_id, gen_random_uuid(), v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE v_decision WHEN 'execute' THEN 'pending' WHEN 'confirm' THEN 'awaiting_confirmation' ELSE 'failed' END,
             v_input, v_money.amount_minor, v_money.currency,
             v_repeats,
             clock_timestamp() + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN clock_timestamp() END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.set_effect_context(NULL, NULL);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id, tool_name, tool_version)
    VALUES (NEW.conversation_id, NEW.tool_call_id, NEW.message_id, NEW.ordinal, v_effect.id, v_decision, v_fork,
            v_tool.name, v_tool.version);
    RETURN NULL;
END;
$$;
