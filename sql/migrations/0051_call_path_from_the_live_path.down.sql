-- 0051_call_path_from_the_live_path down: reverses 0051_call_path_from_the_live_path.up.sql.

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

-- effect_money: an effect's amount and currency as its tool's registration
-- says to read them from the call's input: the amount argument when it is
-- an integer that fits a bigint, the currency argument when it is a
-- three-letter upper-case code; NULL otherwise. The one rule: record_tool_call
-- writes by it and ledger_problems checks stored effects against it.
-- (Its text before 0051, with a quoted body: on a distributed database
-- Citus sends this CREATE to its workers, and cannot send a BEGIN ATOMIC
-- body.)
CREATE OR REPLACE FUNCTION convo_private.effect_money(
    p_input        jsonb,
    p_amount_arg   text,
    p_currency_arg text,
    OUT amount_minor bigint,
    OUT currency     text)
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE WHEN jsonb_typeof(p_input -> p_amount_arg) = 'number'
                 AND (p_input ->> p_amount_arg)::numeric = trunc((p_input ->> p_amount_arg)::numeric)
                 AND abs((p_input ->> p_amount_arg)::numeric) < 9e18
                THEN (p_input ->> p_amount_arg)::numeric::bigint END,
           CASE WHEN p_input ->> p_currency_arg ~ '^[A-Z]{3}$' THEN p_input ->> p_currency_arg END
$$;

-- json_path: the JSON path of an object member, as validation errors name
-- it: $.amount_minor, $["odd key"] (elements are written $.items[2]).
CREATE OR REPLACE FUNCTION convo_private.json_path(p_parent text, p_key text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN p_parent || CASE WHEN p_key ~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN '.' || p_key
                        ELSE '[' || to_jsonb(p_key)::text || ']' END;

-- record_tool_call: writes one tool call's ledger decision, from
-- write_messages, in the transaction that stores its tool_use part, before
-- any request can leave, against the tool's latest version at that moment,
-- which the call's row names (so the decision can be checked against it).
-- An unregistered tool gets no row (effect_for_call answers CV007, even once
-- it is registered); write_messages calls it for no import (those calls
-- happened elsewhere), giving the message's place in the tree (its branch
-- and depth, which the call's row keeps for the re-run lookup and
-- ledger_problems checks against the message). A new effect's first event
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
        ELSE
            -- A call on this message's path (an earlier call of the same
            -- agent turn) is no re-run: the path's segments are read once and
            -- the calls off them found by their place (rerun_candidate).
            SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_seg_branches, v_seg_depths
              FROM convo_private.path_segments(p_conversation_id, p_message_id) s;
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

-- write_messages: the one write path of the tree. Every call that adds
-- messages writes through it (append_message, edit_and_resend and
-- regenerate, complete_generation, create_conversation, the imports), once
-- its caller has checked the owner and locked the conversation
-- (lock_conversation; p_old_head is the head it read). Everything comes in
-- as arguments, by name, nothing through a setting or a marker:
--   the new messages (p_messages, none by default), parents first: each
--   one's id, its parent (an existing message, an earlier new one, or NULL:
--   a root), role, parts, the branch reason asked for (NULL: the tree's,
--   'branch' for a later child), time (NULL: now) and whether it is an
--   answer cut short (incomplete: a stopped or failed generation's); the import writing
--   them (NULL: none), which keeps their times and writes no ledger row
--   (and, a restore, may hold an erased attachment); the head to move to,
--   why and by whom (p_head NULL: the head stays).
-- It reads each existing parent once and computes depth, sibling position
-- and branch (a first child continues its parent's branch, a later sibling
-- starts one); checks every part against its message (part_problem), each
-- tool call id unique in the conversation and each result naming a call of
-- its parent; inserts the messages, their keyed parts (keyed_parts:
-- calls, results, attachments) and their entries in the search index
-- (index_messages) as sets; records each tool call's ledger
-- decision (record_tool_call); and moves the head, with the conversation's
-- last activity (log_head_move: the head log, the live path, the
-- notification). The tables' triggers only guard
-- writes that do not come from pgconvo's own code. DETAILs name where a
-- refused message was going, never its own id, which is not stored.
CREATE OR REPLACE FUNCTION convo_private.write_messages(
    p_conversation_id uuid,
    p_old_head        uuid,
    p_messages        convo_private.new_message[] DEFAULT '{}',
    p_import_id       uuid DEFAULT NULL,
    p_head            uuid DEFAULT NULL,
    p_head_reason     text DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Its statements are shaped by the arrays, not their values: a plan made
-- for one call serves every call (PostgreSQL would otherwise plan them anew
-- each time, at a cost above the statements').
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n       int := coalesce(cardinality(p_messages), 0);
    v_ids     uuid[];  -- the new messages' fields, each an array in their order
    v_parents uuid[];
    v_roles   text[];
    v_parts   jsonb[];
    v_reasons text[];
    v_times   timestamptz[];
    v_incomplete boolean[];
    v_now     timestamptz := clock_timestamp();
    v_pidx    int[];   -- the parent's position among the new messages, 0 for none
    v_call_keys jsonb; -- the write's tool calls, as keys "position id"
    v_pdepth  int[];   -- an existing parent's depth
    v_pbranch uuid[];  -- an existing parent's branch
    v_sib     int[];   -- sibling position: the last under the parent, plus the rank among the new
    v_depth   int[] := '{}';
    v_branch  uuid[] := '{}';
    v_reason  text[] := '{}';
    v_missing int;     -- a new message whose parent is nowhere
    v_bad_i   int;     -- the first problem: its message, its part (0: the message itself),
    v_bad_ordinal int; -- and {SQLSTATE, message, what to add to the DETAIL, hint}
    v_problem text[];
    v_link_i  int;     -- the first problem with a call id or a result's call
    v_link_ordinal int;
    v_link_problem text[];
    v_keyed   boolean; -- the write holds calls, results or attachments
    -- a restore (its record's format pgconvo) writes an erased attachment
    -- as erasure left it (its uri emptied); restore_problem checks that an
    -- erasure of the document covers it
    v_restore boolean := p_import_id IS NOT NULL
                         AND EXISTS (SELECT 1 FROM convo.imports i
                                      WHERE i.conversation_id = p_conversation_id AND i.id = p_import_id AND i.format = 'pgconvo');
    v_linked  boolean; -- calls or results
    v_calls   boolean; -- calls
    v_call    record;
BEGIN
    SELECT array_agg(m.id ORDER BY m.n), array_agg(m.parent_id ORDER BY m.n), array_agg(m.role ORDER BY m.n),
           array_agg(m.parts ORDER BY m.n), array_agg(m.branch_reason ORDER BY m.n), array_agg(m.created_at ORDER BY m.n),
           array_agg(coalesce(m.incomplete, false) ORDER BY m.n)
      INTO v_ids, v_parents, v_roles, v_parts, v_reasons, v_times, v_incomplete
      FROM unnest(p_messages) WITH ORDINALITY AS m (id, parent_id, role, parts, branch_reason, created_at, incomplete, n);
    IF v_n > 0 THEN
        -- Each parent, read once: among the new messages (an earlier one),
        -- or stored, with the last sibling position under it (one probe of
        -- messages_sibling_key in reverse; parent_id in the order keeps the
        -- index order for a root's IS NULL).
        SELECT array_agg(x.pidx ORDER BY x.i), array_agg(x.pdepth ORDER BY x.i),
               array_agg(x.pbranch ORDER BY x.i), array_agg((x.last + x.rank)::int ORDER BY x.i),
               (array_agg(x.i ORDER BY x.i) FILTER (WHERE x.missing))[1]
          INTO v_pidx, v_pdepth, v_pbranch, v_sib, v_missing
          FROM (SELECT n.i, coalesce(b.i, 0)::int AS pidx, p.depth AS pdepth, p.branch_id AS pbranch,
                       n.parent_id IS NOT NULL AND b.i IS NULL AND p.id IS NULL AS missing,
                       CASE WHEN b.i IS NOT NULL THEN 0
                            WHEN n.parent_id IS NULL THEN
                                 coalesce((SELECT s.sibling_index FROM convo.messages s
                                            WHERE s.conversation_id = p_conversation_id AND s.parent_id IS NULL
                                            ORDER BY s.parent_id DESC, s.sibling_index DESC LIMIT 1), 0)
                            ELSE coalesce((SELECT s.sibling_index FROM convo.messages s
                                            WHERE s.conversation_id = p_conversation_id AND s.parent_id = n.parent_id
                                            ORDER BY s.sibling_index DESC LIMIT 1), 0) END AS last,
                       row_number() OVER (PARTITION BY n.parent_id ORDER BY n.i) AS rank
                  FROM unnest(v_ids, v_parents) WITH ORDINALITY AS n (id, parent_id, i)
                  LEFT JOIN unnest(v_ids) WITH ORDINALITY AS b (id, i) ON b.id = n.parent_id AND b.i < n.i
                  LEFT JOIN convo.messages p
                         ON b.i IS NULL AND p.conversation_id = p_conversation_id AND p.id = n.parent_id) x;
        IF v_missing IS NOT NULL THEN
            PERFORM convo_private.raise_not_found('message', v_parents[v_missing]::text, p_conversation_id,
                convo_private.other_conversation(p_conversation_id, 'convo.messages', 'id', v_parents[v_missing]::text));
        END IF;
        FOR i IN 1 .. v_n LOOP
            IF v_pidx[i] > 0 THEN
                v_depth[i] := v_depth[v_pidx[i]] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_branch[v_pidx[i]] ELSE v_ids[i] END;
            ELSIF v_parents[i] IS NULL THEN
                v_depth[i] := 0;
                v_branch[i] := v_ids[i];
            ELSE
                v_depth[i] := v_pdepth[i] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_pbranch[i] ELSE v_ids[i] END;
            END IF;
            v_reason[i] := CASE WHEN v_sib[i] > 1 THEN coalesce(v_reasons[i], 'branch') END;
        END LOOP;

        -- Every message and part as the contract says, the first problem by
        -- position (role and parts, then each part: part_problem), and
        -- whether the write holds parts addressed by key, in one pass over
        -- the parts.
        SELECT x.i, x.ordinal, x.problem,
               bool_or(x.type IN ('tool_use', 'tool_result', 'attachment')) OVER (),
               bool_or(x.type IN ('tool_use', 'tool_result')) OVER (),
               bool_or(x.type = 'tool_use') OVER ()
          INTO v_bad_i, v_bad_ordinal, v_problem, v_keyed, v_linked, v_calls
          FROM (SELECT m.i, 0 AS ordinal, NULL::text AS type,
                       CASE WHEN m.role IS NULL OR m.role NOT IN ('system', 'user', 'assistant', 'tool')
                                 THEN ARRAY['CV011', format('unknown role %s', coalesce(quote_literal(m.role), 'NULL')), '',
                                            'Roles are system, user, assistant and tool.']
                            WHEN m.parts IS NULL THEN ARRAY['CV011', 'p_parts is required', '', '']
                            WHEN jsonb_typeof(m.parts) <> 'array'
                                 THEN ARRAY['CV008', format('p_parts must be a JSON array, not %s', jsonb_typeof(m.parts)), '', '']
                            WHEN jsonb_array_length(m.parts) = 0 THEN ARRAY['CV008', 'p_parts must not be empty', '', '']
                            WHEN octet_length(m.parts::text) > convo.max_message_bytes()
                                 THEN ARRAY['CV010', format('a message is larger than %s bytes', convo.max_message_bytes()),
                                            format(': %s bytes', octet_length(m.parts::text)), '']
                            WHEN m.reason IS NOT NULL AND v_sib[m.i] = 1
                                 THEN ARRAY['CV011', 'a first child has no branch_reason', format(', branch_reason %s', m.reason), '']
                       END AS problem
                  FROM unnest(v_roles, v_parts, v_reasons) WITH ORDINALITY AS m (role, parts, reason, i)
                UNION ALL
                SELECT m.i, e.n::int, e.part ->> 'type',
                       CASE WHEN v_restore AND e.part ->> 'type' = 'attachment' AND e.part = convo_private.redact_part(e.part)
                                 AND jsonb_typeof(e.part -> 'media_type') = 'string' AND e.part ->> 'media_type' <> ''
                            THEN NULL ELSE convo_private.part_problem(e.part, m.role) END
                  FROM unnest(v_roles, v_parts) WITH ORDINALITY AS m (role, parts, i),
                       jsonb_array_elements(CASE WHEN jsonb_typeof(m.parts) = 'array' THEN m.parts ELSE '[]' END)
                           WITH ORDINALITY AS e (part, n)) x
         ORDER BY x.problem IS NULL, x.i, x.ordinal
         LIMIT 1;
        -- What needs other rows, only for a write with calls or results: a
        -- call id once in the conversation, a result naming a call of its
        -- parent (stored, or new in the same write). The earlier problem wins.
        IF v_linked THEN
            -- The write's own calls, by message position and id.
            SELECT jsonb_object_agg(m.i || ' ' || (e.part ->> 'id'), true) INTO v_call_keys
              FROM unnest(v_parts) WITH ORDINALITY AS m (parts, i),
                   jsonb_array_elements(m.parts) AS e (part)
             WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use' AND e.part ->> 'id' IS NOT NULL;
            SELECT x.i, x.ordinal, x.problem INTO v_link_i, v_link_ordinal, v_link_problem FROM (
                SELECT c.i, c.n::int AS ordinal,
                       ARRAY['CV008', format('tool call id %s is already used in this conversation', c.id),
                             format(', tool call %s', c.id), ''] AS problem
                  FROM (SELECT m.i, e.n, e.part ->> 'id' AS id,
                               count(*) OVER (PARTITION BY e.part ->> 'id' ORDER BY m.i, e.n) AS nth
                          FROM unnest(v_parts) WITH ORDINALITY AS m (parts, i),
                               jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                         WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use') c
                 WHERE c.nth > 1
                    OR EXISTS (SELECT 1 FROM convo.keyed_parts k
                                WHERE k.conversation_id = p_conversation_id AND k.type = 'tool_use' AND k.tool_call_id = c.id)
                UNION ALL
                -- A result's call: among its parent's calls in this write (one
                -- lookup in v_call_keys, so a tree of many calls and results costs
                -- linear), else among its stored ones.
                SELECT r.i, r.n::int,
                       ARRAY['CV008', format('tool_result names tool call %s, which is not a tool_use of the parent message', r.id),
                             format(', tool call %s, parent %s', r.id, coalesce(r.parent_id::text, 'none')), '']
                  FROM (SELECT m.i, e.n, e.part ->> 'tool_use_id' AS id, m.parent_id
                          FROM unnest(v_parts, v_parents) WITH ORDINALITY AS m (parts, parent_id, i),
                               jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                         WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_result') r
                 WHERE NOT CASE WHEN v_pidx[r.i] > 0
                                THEN coalesce(v_call_keys ? (v_pidx[r.i] || ' ' || r.id), false)
                                ELSE EXISTS (SELECT 1 FROM convo.keyed_parts k
                                              WHERE k.conversation_id = p_conversation_id AND k.message_id = r.parent_id
                                                AND k.type = 'tool_use' AND k.tool_call_id = r.id) END
            ) AS x (i, ordinal, problem)
            ORDER BY x.i, x.ordinal
            LIMIT 1;
            IF v_link_problem IS NOT NULL
               AND (v_problem IS NULL OR (v_link_i, v_link_ordinal) < (v_bad_i, v_bad_ordinal)) THEN
                v_bad_i := v_link_i;
                v_bad_ordinal := v_link_ordinal;
                v_problem := v_link_problem;
            END IF;
        END IF;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION '%', v_problem[2]
                USING ERRCODE = v_problem[1], HINT = v_problem[4],
                      DETAIL = format('a new %s message in conversation %s, parent %s', coalesce(v_roles[v_bad_i], 'NULL'),
                                      p_conversation_id, coalesce(v_parents[v_bad_i]::text, 'none (a root)'))
                               || CASE WHEN v_bad_ordinal > 0 THEN format(', part %s', v_bad_ordinal - 1) ELSE '' END
                               || v_problem[3];
        END IF;

        INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, depth, sibling_index, branch_id,
                                    parts, created_at, import_id, incomplete)
        SELECT p_conversation_id, x.id, x.parent_id, x.role, x.reason, x.depth, x.sib, x.branch, x.parts,
               coalesce(x.at, v_now), p_import_id, x.incomplete
          FROM unnest(v_ids, v_parents, v_roles, v_reason, v_depth, v_sib, v_branch, v_parts, v_times, v_incomplete)
               WITH ORDINALITY AS x (id, parent_id, role, reason, depth, sib, branch, parts, at, incomplete, i)
         ORDER BY x.i;
        -- Their text in the search index (search_conversations).
        PERFORM convo_private.index_messages(p_conversation_id, v_ids, v_parts);

        -- The parts addressed by key, one row each; the rest live only in
        -- the message's own array.
        IF v_keyed THEN
            INSERT INTO convo.keyed_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name)
            SELECT p_conversation_id, m.id, (e.n - 1)::int, e.part ->> 'type',
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'id'
                        WHEN e.part ->> 'type' = 'tool_result' THEN e.part ->> 'tool_use_id' END,
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END
              FROM unnest(v_ids, v_parts) AS m (id, parts),
                   jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
             WHERE e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment');
        END IF;
        -- Each tool call's ledger decision, before any request can leave;
        -- an import's calls happened elsewhere and get none.
        IF v_calls AND p_import_id IS NULL THEN
            FOR v_call IN
                SELECT m.id, (e.n - 1)::int AS ordinal, e.part, m.branch, m.depth
                  FROM unnest(v_ids, v_parts, v_branch, v_depth) WITH ORDINALITY AS m (id, parts, branch, depth, i),
                       jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                 WHERE e.part ->> 'type' = 'tool_use'
                 ORDER BY m.i, e.n
            LOOP
                -- A message's first calls on this function's generic plans;
                -- from its eighth part on, each planned afresh against the
                -- ledger the earlier ones grew (record_tool_call_planned).
                IF v_call.ordinal < 7 THEN
                    PERFORM convo_private.record_tool_call(p_conversation_id, v_call.id, v_call.ordinal,
                                                           v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input',
                                                           v_call.branch, v_call.depth);
                ELSE
                    PERFORM convo_private.record_tool_call_planned(p_conversation_id, v_call.id, v_call.ordinal,
                                                                   v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input',
                                                                   v_call.branch, v_call.depth);
                END IF;
            END LOOP;
        END IF;
    END IF;

    IF p_head IS NOT NULL AND p_head IS DISTINCT FROM p_old_head THEN
        -- The conversation's last activity moves with its head: now, or for
        -- an import the latest original time it writes.
        UPDATE convo.conversations c
           SET head_message_id = p_head,
               last_activity_at = CASE WHEN p_import_id IS NULL OR v_times IS NULL THEN v_now
                                       ELSE coalesce((SELECT max(t) FROM unnest(v_times) AS t), v_now) END
         WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_head_move(p_conversation_id, p_head, p_old_head, p_head_reason, p_moved_by, p_import_id);
    END IF;
END;
$$;

-- Reverse the table changes here, below the objects.

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
