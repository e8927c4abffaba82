-- record_tool_call: writes one tool call's ledger decision, from
-- write_messages, in the transaction that stores its tool_use part, before
-- any request can leave, against the tool's latest version at that moment,
-- which the call's row names (so the decision can be checked against it).
-- An unregistered tool gets no row (effect_for_call answers CV007, even once
-- it is registered); write_messages calls it for no import (those calls
-- happened elsewhere), giving the message's place in the tree (its branch
-- and depth, which the call's row keeps for the re-run lookup and
-- ledger_problems checks against the message). A turn's first call of a
-- tool at its fork point has nothing to run again, and is decided without
-- reading the path. A new effect's first event
-- is written with it (effect_event). Its statements, the re-run lookup's
-- too (rerun_candidate), run on generic plans, made once. A generic plan
-- made while the ledger was nearly empty may scan it (or the
-- conversation's part of it) whatever the index, and a message of N calls
-- grows the ledger within one statement: so from a message's eighth part
-- on, write_messages calls it through record_tool_call_planned, which
-- plans each call afresh against the ledger as the earlier calls left it,
-- and N calls cost N lookups, not N squared.
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key (of this key epoch:
--             since the conversation's latest erasure): the call is linked to it.
--   confirm:  a re-run (same tool, same fork point, an earlier call on another
--             branch) under a new key: held in awaiting_confirmation.
--   execute:  a new pending effect under the scope key.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_ordinal         int,
    p_tool_call_id    text,
    p_tool_name       text,
    p_input           jsonb,
    p_branch_id       uuid,
    p_depth           int)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := p_input;
    v_now       timestamptz := clock_timestamp();
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
    v_epoch     int;
    v_effect    convo.tool_effects;
    v_repeats   uuid;
    v_seg_branches uuid[]; -- the segments of this message's path: each branch
    v_seg_depths   int[];  -- and the deepest of it on the path
    v_seg_joined   boolean; -- whether the live-path index's segments join up
    v_decision  text;
    v_money     record;
    v_id        uuid := gen_random_uuid();
BEGIN
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = p_tool_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_fork := convo_private.call_fork_point(p_conversation_id, p_message_id);
    v_errors := CASE WHEN v_tool.effectful THEN convo.args_errors(v_tool.args_schema, v_input) END;
    IF NOT v_tool.effectful THEN
        v_decision := 'replay';
    ELSIF cardinality(v_errors) > 0 THEN
        -- Rejected calls never deduplicate: the key is the call's own.
        v_decision := 'rejected';
        v_scope_key := convo_private.scope_key('rejected', p_conversation_id, p_tool_call_id, NULL, NULL, NULL,
                                               convo_private.key_epoch(p_conversation_id, NULL));
    ELSE
        -- The key of this epoch (every erasure so far: the conversation is
        -- locked), so nothing erased is ever matched.
        v_epoch := convo_private.key_epoch(p_conversation_id, NULL);
        v_scope_key := convo_private.scope_key(v_tool.idempotency_scope, p_conversation_id, p_tool_call_id,
                                               v_fork, v_tool.name, v_input, v_epoch);
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = p_conversation_id AND e.scope_key = v_scope_key;
        IF FOUND THEN
            v_decision := 'reuse';
        ELSIF NOT EXISTS (SELECT 1 FROM convo.tool_effect_calls l
                           WHERE l.conversation_id = p_conversation_id
                             AND coalesce(l.fork_point_id, l.conversation_id) = coalesce(v_fork, p_conversation_id)
                             AND l.tool_name = p_tool_name) THEN
            -- No call of the tool at this fork point yet (a turn's first
            -- call of it): nothing to run again, one probe of the re-run
            -- index, without reading the path (rerun_candidate would answer
            -- none).
            v_decision := 'execute';
        ELSE
            -- A call on this message's path (an earlier call of the same
            -- agent turn) is no re-run: the path's segments are read once and
            -- the calls off them found by their place (rerun_candidate). A
            -- message whose parent is on the live path (an agent turn's next
            -- call, below the head) continues a segment of the live-path
            -- index: its path is the segments above that one, and that one
            -- down to the message, one range read, taken only if they join
            -- up from the root (each starts below the one before: an index
            -- damaged past its guards is not trusted to decide); any other
            -- is walked up the tree (path_segments).
            SELECT array_agg(s.branch_id), array_agg(s.max_depth), bool_and(s.joins)
              INTO v_seg_branches, v_seg_depths, v_seg_joined
              FROM (SELECT l.branch_id, CASE WHEN l.branch_id = p_branch_id THEN p_depth ELSE l.max_depth END AS max_depth,
                           l.min_depth = coalesce(lag(l.max_depth) OVER (ORDER BY l.min_depth) + 1, 0) AS joins
                      FROM convo.live_path l
                     WHERE l.conversation_id = p_conversation_id
                       AND l.min_depth <= (SELECT b.min_depth FROM convo.live_path b
                                            WHERE b.conversation_id = p_conversation_id AND b.branch_id = p_branch_id
                                              AND p_depth - 1 BETWEEN b.min_depth AND b.max_depth
                                            LIMIT 1)) s;
            IF v_seg_branches IS NULL OR NOT v_seg_joined THEN
                SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_seg_branches, v_seg_depths
                  FROM convo_private.path_segments(p_conversation_id, p_message_id) s;
            END IF;
            v_repeats := convo_private.rerun_candidate(p_conversation_id, v_fork, p_tool_name,
                                                       v_seg_branches, v_seg_depths);
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        SELECT * INTO v_money FROM convo_private.effect_money(v_input, v_tool.amount_arg, v_tool.currency_arg);
        -- Each CASE searched: Citus sends a simple CASE over a variable to
        -- the node as a comparison of text with boolean.
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, requested_at, deadline_at, settled_at, http_status, error_code)
        VALUES
            (p_conversation_id, v_id, v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE WHEN v_decision = 'execute' THEN 'pending' WHEN v_decision = 'confirm' THEN 'awaiting_confirmation'
                  ELSE 'failed' END,
             v_input, v_money.amount_minor, v_money.currency,
             v_repeats, v_now,
             v_now + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN v_now END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.effect_event(p_conversation_id, v_effect.id, 'requested', v_effect.state, convo_private.caller(),
                                           CASE WHEN v_decision = 'rejected'
                                                THEN jsonb_build_object('errors', to_jsonb(v_errors)) ELSE '{}' END);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id, tool_name, tool_version,
         branch_id, depth)
    VALUES (p_conversation_id, p_tool_call_id, p_message_id, p_ordinal, v_effect.id, v_decision, v_fork,
            v_tool.name, v_tool.version, p_branch_id, p_depth);
END;
$$;
