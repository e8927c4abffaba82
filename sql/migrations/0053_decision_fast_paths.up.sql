-- 0053_decision_fast_paths: a turn's first call of a tool at its fork point is decided without reading the path; effect_for_call reads the decision first; args_errors and settle_effect evaluate a query only where its answer can matter (enum, a repeated settlement).

-- Create as the migrating role, never as the owner role convo_owner, which
-- cannot log in (Citus runs DDL on its workers as the current role). A role
-- that is not a superuser becomes a member of convo_owner for this
-- transaction only (it needs CREATEROLE for that), to create in its schemas
-- and hand it what it creates.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
    END IF;
END;
$$;

-- Table changes, written by hand, go here, above the objects that use them.

-- args_errors: validates a JSON value against an argument schema (the
-- subset check_args_schema admits, boolean schemas included) inside the
-- database. Returns one line per failure, naming the JSON path and the rule
-- ("$.amount_minor: minimum 1"), or an empty array when the value is valid.
-- It walks the schema and the value together with a stack of its own, not
-- by recursion, visiting each value at most once: linear in the value, and
-- no input can exhaust the server's stack. A value nested deeper than 64
-- levels of arrays and objects fails as a whole ("$: nesting: ...") before
-- any rule is looked at, whatever the schema. SQL NULL is no JSON value: CV011.
CREATE OR REPLACE FUNCTION convo.args_errors(p_schema jsonb, p_value jsonb, p_path text DEFAULT '$')
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
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
    v_errors  text[] := '{}';
    -- The stack of (schema, value, path) still to check; v_top is its height.
    v_schemas jsonb[] := ARRAY[p_schema];
    v_values  jsonb[] := ARRAY[p_value];
    v_paths   text[] := ARRAY[p_path];
    v_top     int := 1;
    v_base    int;
    v_schema  jsonb;
    v_value   jsonb;
    v_path    text;
    v_type    text;
    v_types   jsonb;
    v_num     numeric;
    v_len     int;
    v_key     text;
    v_sub     jsonb;
    v_i       int;
    v_lo      int;
    v_hi      int;
BEGIN
    IF p_schema IS NULL OR p_value IS NULL OR p_path IS NULL THEN
        RAISE EXCEPTION 'p_schema, p_value and p_path are required'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s is SQL NULL', concat_ws(', ', CASE WHEN p_schema IS NULL THEN 'p_schema' END,
                                                          CASE WHEN p_value IS NULL THEN 'p_value' END,
                                                          CASE WHEN p_path IS NULL THEN 'p_path' END)),
                  HINT = 'JSON null is the jsonb value ''null'', not SQL NULL.';
    END IF;
    -- The nesting cap, measured by one bounded jsonpath walk (it looks no
    -- deeper than level 64): is there an array or object at level 64, that
    -- is, a 65th level of nesting?
    IF jsonb_path_exists(p_value, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') THEN
        RETURN ARRAY[format('%s: nesting: deeper than 64 levels of arrays and objects', p_path)];
    END IF;

    WHILE v_top > 0 LOOP
        v_schema := v_schemas[v_top];
        v_value := v_values[v_top];
        v_path := v_paths[v_top];
        v_top := v_top - 1;
        v_base := v_top;

        IF v_schema = 'true' THEN
            CONTINUE;
        ELSIF v_schema = 'false' THEN
            v_errors := v_errors || format('%s: false: no value is allowed', v_path);
            CONTINUE;
        END IF;

        v_type := jsonb_typeof(v_value);
        v_num := CASE WHEN v_type = 'number' THEN v_value::text::numeric END;
        IF v_schema ? 'type' THEN
            v_types := CASE jsonb_typeof(v_schema -> 'type') WHEN 'array' THEN v_schema -> 'type'
                                                             ELSE jsonb_build_array(v_schema -> 'type') END;
            IF NOT (v_types ? v_type OR (v_type = 'number' AND v_types ? 'integer' AND v_num = trunc(v_num))) THEN
                v_errors := v_errors || format('%s: type: expected %s, got %s', v_path,
                                               array_to_string(ARRAY(SELECT jsonb_array_elements_text(v_types)), ' or '), v_type);
                CONTINUE;
            END IF;
        END IF;
        -- jsonb's equality: numbers by value (1 = 1.0), objects whatever
        -- their key order, strings by code point.
        IF v_schema ? 'const' AND v_value <> v_schema -> 'const' THEN
            v_errors := v_errors || format('%s: const: must be %s', v_path, v_schema -> 'const');
        END IF;
        -- Nested, so that a schema without enum evaluates no query.
        IF v_schema ? 'enum' THEN
            IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_schema -> 'enum') e WHERE e = v_value) THEN
                v_errors := v_errors || format('%s: enum: must be one of %s', v_path, v_schema -> 'enum');
            END IF;
        END IF;

        IF v_type = 'string' THEN
            v_len := length(v_value #>> '{}');  -- characters (code points), not bytes
            IF v_len < (v_schema ->> 'minLength')::numeric THEN
                v_errors := v_errors || format('%s: minLength %s', v_path, v_schema -> 'minLength');
            END IF;
            IF v_len > (v_schema ->> 'maxLength')::numeric THEN
                v_errors := v_errors || format('%s: maxLength %s', v_path, v_schema -> 'maxLength');
            END IF;
            IF v_schema ? 'pattern' AND NOT (v_value #>> '{}') ~ (v_schema ->> 'pattern') THEN
                v_errors := v_errors || format('%s: pattern %s', v_path, v_schema -> 'pattern');
            END IF;
        ELSIF v_type = 'number' THEN
            IF v_num < (v_schema ->> 'minimum')::numeric THEN
                v_errors := v_errors || format('%s: minimum %s', v_path, v_schema -> 'minimum');
            END IF;
            IF v_num > (v_schema ->> 'maximum')::numeric THEN
                v_errors := v_errors || format('%s: maximum %s', v_path, v_schema -> 'maximum');
            END IF;
        ELSIF v_type = 'array' THEN
            v_len := jsonb_array_length(v_value);
            IF v_len < (v_schema ->> 'minItems')::numeric THEN
                v_errors := v_errors || format('%s: minItems %s', v_path, v_schema -> 'minItems');
            END IF;
            IF v_len > (v_schema ->> 'maxItems')::numeric THEN
                v_errors := v_errors || format('%s: maxItems %s', v_path, v_schema -> 'maxItems');
            END IF;
            IF v_schema ? 'items' AND v_schema -> 'items' <> 'true' THEN
                FOR v_sub, v_i IN SELECT e.value, e.ordinality - 1 FROM jsonb_array_elements(v_value) WITH ORDINALITY e LOOP
                    v_top := v_top + 1;
                    v_schemas[v_top] := v_schema -> 'items';
                    v_values[v_top] := v_sub;
                    v_paths[v_top] := format('%s[%s]', v_path, v_i);
                END LOOP;
            END IF;
        ELSIF v_type = 'object' THEN
            FOR v_key IN SELECT jsonb_array_elements_text(v_schema -> 'required') LOOP
                IF NOT v_value ? v_key THEN
                    v_errors := v_errors || format('%s: required', convo_private.json_path(v_path, v_key));
                END IF;
            END LOOP;
            FOR v_key, v_sub IN SELECT * FROM jsonb_each(v_value) LOOP
                IF v_schema -> 'properties' ? v_key THEN
                    v_top := v_top + 1;
                    v_schemas[v_top] := v_schema -> 'properties' -> v_key;
                    v_values[v_top] := v_sub;
                    v_paths[v_top] := convo_private.json_path(v_path, v_key);
                ELSIF v_schema -> 'additionalProperties' = 'false' THEN
                    v_errors := v_errors || format('%s: additionalProperties: not allowed', convo_private.json_path(v_path, v_key));
                END IF;
            END LOOP;
        END IF;

        -- The children were pushed in document order: reverse them on the
        -- stack, so that they are checked, and their errors listed, in it.
        v_lo := v_base + 1;
        v_hi := v_top;
        WHILE v_lo < v_hi LOOP
            v_schema := v_schemas[v_lo]; v_schemas[v_lo] := v_schemas[v_hi]; v_schemas[v_hi] := v_schema;
            v_value := v_values[v_lo];   v_values[v_lo] := v_values[v_hi];   v_values[v_hi] := v_value;
            v_path := v_paths[v_lo];     v_paths[v_lo] := v_paths[v_hi];     v_paths[v_hi] := v_path;
            v_lo := v_lo + 1;
            v_hi := v_hi - 1;
        END LOOP;
    END LOOP;
    RETURN v_errors;
END;
$$;

COMMENT ON FUNCTION convo.args_errors(jsonb, jsonb, text) IS
    'Validate a JSON value against an argument schema (the supported JSON Schema subset): one "path: rule" line per failure.';

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

-- Give convo_owner what this migration created, then grant as documented.
SELECT convo_private.hand_over_objects();
SELECT convo_private.apply_grants();

-- Give back a membership taken above.
-- (A membership the role granted itself; one another role granted stays.)
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                WHERE m.roleid = 'convo_owner'::regrole AND m.member = current_user::regrole
                  AND m.grantor = m.member) THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_user);
    END IF;
END;
$$;
