-- 0010_import down: reverses 0010_import.up.sql.

-- Act as the owner role: a migrating role that is not a superuser becomes
-- a member for this transaction only (it needs CREATEROLE for that).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- self_check: every invariant a DBA can verify on a live database, one row
-- per check, ok or not with the offenders (the first 10) in detail. It reads
-- every row of the package once per check: run it from a maintenance job or
-- `migrate verify`, not from a request.
CREATE OR REPLACE FUNCTION convo.self_check()
RETURNS TABLE (check_name text, ok boolean, detail text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad text[];
BEGIN
    -- Triggers: each of the package's present and ENABLE ALWAYS (so neither
    -- session_replication_role nor a plain ENABLE skips it), by what it guards.
    FOR check_name, v_bad IN
        SELECT g.guards, array_agg(g.table_name || '.' || g.trigger_name || ' '
                                   || CASE WHEN tg.oid IS NULL THEN 'missing' ELSE 'enabled=' || tg.tgenabled::text END
                                   ORDER BY g.table_name, g.trigger_name)
                             FILTER (WHERE tg.oid IS NULL OR tg.tgenabled <> 'A')
          FROM convo_private.package_triggers() g
          LEFT JOIN pg_trigger tg ON tg.tgname = g.trigger_name
               AND tg.tgrelid = to_regclass('convo.' || g.table_name)
         GROUP BY g.guards
    LOOP
        check_name := CASE check_name WHEN 'append_only' THEN 'append_only_triggers'
                                      WHEN 'head_log' THEN 'head_log_trigger' ELSE 'rule_triggers' END;
        ok := v_bad IS NULL;
        detail := coalesce(array_to_string(v_bad[1:10], '; '), 'all present, enabled always');
        RETURN NEXT;
    END LOOP;

    -- No trigger of anyone else's on the package's tables: with TRIGGER
    -- privilege a role could rewrite rows on their way in.
    SELECT array_agg(c.relname || '.' || tg.tgname ORDER BY c.relname, tg.tgname) INTO v_bad
      FROM pg_trigger tg
      JOIN pg_class c ON c.oid = tg.tgrelid
     WHERE c.relnamespace = 'convo'::regnamespace AND NOT tg.tgisinternal
       AND NOT EXISTS (SELECT 1 FROM convo_private.package_triggers() g
                        WHERE g.table_name = c.relname AND g.trigger_name = tg.tgname);
    RETURN QUERY SELECT 'no_foreign_triggers', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'none');

    -- Every head equals its last head-log row, and each log row starts where
    -- the one before it ended.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ' head ' || coalesce(c.head_message_id::text, 'none')
               || ', last logged ' || coalesce(last.head_message_id::text, 'none') AS id
          FROM convo.conversations c
          LEFT JOIN LATERAL (SELECT l.head_message_id FROM convo.conversation_head_log l
                              WHERE l.conversation_id = c.id ORDER BY l.seq DESC LIMIT 1) last ON true
         WHERE c.head_message_id IS DISTINCT FROM last.head_message_id
        UNION ALL
        SELECT 'conversation ' || l.conversation_id || ' log seq ' || l.seq || ' does not start where '
               || coalesce('seq ' || l.prev_seq || ' ended', 'the conversation began')
          FROM (SELECT l.*, lag(l.head_message_id) OVER w AS prev_head, lag(l.seq) OVER w AS prev_seq
                  FROM convo.conversation_head_log l
                WINDOW w AS (PARTITION BY l.conversation_id ORDER BY l.seq)) l
         WHERE l.previous_head_id IS DISTINCT FROM l.prev_head) x;
    RETURN QUERY SELECT 'heads_match_log', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every head is its last logged move');

    -- The live-path index (convo.live_path, what path reads) holds exactly
    -- the path from the root to each head, with its sibling counts, walked
    -- from the tree here. Repair: convo_private.rebuild_live_path(id).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ': ' || d.n || ' live_path rows differ from the path to its head' AS id
          FROM convo.conversations c
         CROSS JOIN LATERAL (
               SELECT count(*) AS n
                 FROM convo_private.path_from(c.id, c.head_message_id, NULL) p
                 FULL JOIN (SELECT l.* FROM convo.live_path l WHERE l.conversation_id = c.id) l ON l.depth = p.depth
                WHERE p.message_id IS DISTINCT FROM l.message_id OR p.sibling_count IS DISTINCT FROM l.sibling_count) d
         WHERE d.n > 0
        UNION ALL
        SELECT 'live_path rows of conversation ' || l.conversation_id || ', which does not exist'
          FROM convo.live_path l
         WHERE NOT EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = l.conversation_id)
         GROUP BY l.conversation_id) x;
    RETURN QUERY SELECT 'live_path_index', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every live path is its head''s path');

    -- Every effect was created by exactly one call (execute, confirm or
    -- rejected) and every link names a tool_use of the effect's tool.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' has ' || count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse')
               || ' creating calls' AS id
          FROM convo.tool_effects e
          LEFT JOIN convo.tool_effect_calls l ON l.conversation_id = e.conversation_id AND l.effect_id = e.id
         GROUP BY e.conversation_id, e.id
        HAVING count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse') <> 1
        UNION ALL
        SELECT 'call ' || l.tool_call_id || ' of conversation ' || l.conversation_id || ' links a part that is not its tool_use'
          FROM convo.tool_effect_calls l
          JOIN convo.message_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
         WHERE p.type <> 'tool_use' OR p.tool_call_id <> l.tool_call_id
            OR (e.id IS NOT NULL AND e.tool_name <> p.tool_name)) x;
    RETURN QUERY SELECT 'effects_linked', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every effect and link is consistent');

    -- Every effect's events form one chain from 'requested' to its state, and
    -- every CHECK that ties a state to its columns is in force (validated).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' is ' || e.state || ', its events end at '
               || coalesce(last.to_state, 'nothing') AS id
          FROM convo.tool_effects e
          LEFT JOIN LATERAL (SELECT ev.to_state FROM convo.tool_effect_events ev
                              WHERE ev.conversation_id = e.conversation_id AND ev.effect_id = e.id
                              ORDER BY ev.seq DESC LIMIT 1) last ON true
         WHERE last.to_state IS DISTINCT FROM e.state
        UNION ALL
        SELECT 'effect ' || ev.effect_id || ' event ' || ev.seq || ' starts from ' || ev.from_state
          FROM (SELECT ev.*, lag(ev.to_state, 1, 'requested') OVER (PARTITION BY ev.conversation_id, ev.effect_id
                                                                   ORDER BY ev.seq) AS prev_state
                  FROM convo.tool_effect_events ev) ev
         WHERE ev.from_state <> ev.prev_state
        UNION ALL
        SELECT 'constraint ' || con.conname || ' is not validated'
          FROM pg_constraint con
         WHERE con.connamespace = 'convo'::regnamespace AND NOT con.convalidated) x;
    RETURN QUERY SELECT 'effect_states_consistent', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every state matches its event chain');

    -- Row-level security on every owner-scoped table. It is enabled, not
    -- forced: the API functions run as the owner role and check the owner
    -- once per call (sees_owner, writes_owner), which keeps the path at the
    -- cost of a flat read; any other role is bound by the policies.
    SELECT array_agg(t.name ORDER BY t.name) INTO v_bad
      FROM unnest(ARRAY['conversations', 'messages', 'message_parts', 'conversation_head_log', 'generations',
                        'tool_effects', 'tool_effect_calls', 'tool_effect_events', 'tool_receipts',
                        'erasures', 'erasure_places', 'live_path']) AS t (name)
      LEFT JOIN pg_class c ON c.oid = to_regclass('convo.' || t.name)
     WHERE c.relrowsecurity IS NOT TRUE;
    RETURN QUERY SELECT 'row_level_security', v_bad IS NULL,
                        coalesce('not enabled on ' || array_to_string(v_bad, ', '),
                                 'enabled on every owner-scoped table');

    -- Privileges exactly as documented: nothing for PUBLIC, nothing on a table
    -- for convo_app, nothing at all on convo_private.
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        (SELECT 'extra: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee AS d
           FROM (SELECT * FROM convo_private.granted_privileges()
                 EXCEPT SELECT * FROM convo_private.documented_grants()) g)
        UNION ALL
        (SELECT 'missing: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee
           FROM (SELECT * FROM convo_private.documented_grants()
                 EXCEPT SELECT * FROM convo_private.granted_privileges()) g)) x;
    RETURN QUERY SELECT 'privileges', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'exactly as documented');

    -- Every object belongs to convo_owner, which cannot log in, is no
    -- superuser, and has no member that can (read from pg_auth_members, not
    -- pg_has_role, which fails on a role dropped while the query runs).
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        SELECT 'schema ' || n.nspname || ' owned by ' || pg_get_userbyid(n.nspowner) AS d
          FROM pg_namespace n
         WHERE n.nspname IN ('convo', 'convo_private') AND pg_get_userbyid(n.nspowner) <> 'convo_owner'
        UNION ALL
        SELECT 'relation ' || c.oid::regclass || ' owned by ' || pg_get_userbyid(c.relowner)
          FROM pg_class c
         WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(c.relowner) <> 'convo_owner'
        UNION ALL
        SELECT 'function ' || p.oid::regprocedure || ' owned by ' || pg_get_userbyid(p.proowner)
          FROM pg_proc p
         WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(p.proowner) <> 'convo_owner'
        UNION ALL
        SELECT 'role convo_owner can log in or is a superuser'
          FROM pg_roles r WHERE r.rolname = 'convo_owner' AND (r.rolcanlogin OR r.rolsuper)
        UNION ALL
        SELECT 'login role ' || r.rolname || ' is a member of convo_owner'
          FROM (WITH RECURSIVE members (oid) AS (
                    SELECT m.member FROM pg_auth_members m WHERE m.roleid = 'convo_owner'::regrole
                    UNION
                    SELECT m.member FROM pg_auth_members m JOIN members ON m.roleid = members.oid)
                SELECT members.oid FROM members) mm
          JOIN pg_roles r ON r.oid = mm.oid
         WHERE r.rolcanlogin AND NOT r.rolsuper) x;
    RETURN QUERY SELECT 'ownership', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every object owned by convo_owner, which no login role can become');
END;
$$;

COMMENT ON FUNCTION convo.self_check() IS
    'Every invariant a DBA can verify on a live database: one row per check, ok, and the offenders in detail.';

-- erase_content: one erasure, recorded first in convo.erasures (which is
-- what lets the redaction past the append-only and state-machine triggers:
-- is_erasure), then written: every row of the conversation that holds
-- content becomes its redact_row, or, with no conversation, every receipt of
-- the owner. Rows already redacted are left alone, so a repeat changes
-- nothing and returns no rows, but is recorded. One row per place (table)
-- where rows changed, also recorded in convo.erasure_places.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_place   record;
    v_n       bigint;
BEGIN
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    -- Each place: its table, the columns redact_row changes, and the key
    -- that selects the conversation's (or the owner's) rows.
    FOR v_place IN
        SELECT * FROM (VALUES
            ('messages', 'parts', 'conversation_id'),
            ('message_parts', 'body', 'conversation_id'),
            ('conversations', 'metadata', 'id'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id'),
            ('tool_effects', 'arguments', 'conversation_id'),
            ('tool_effect_events', 'evidence', 'conversation_id'),
            ('tool_receipts', 'request, arguments, expected', 'owner_id')) AS p (tab, cols, key)
         WHERE (p.tab = 'tool_receipts') = (p_conversation_id IS NULL)
    LOOP
        EXECUTE format('UPDATE convo.%1$I t SET (%2$s) = (SELECT %2$s FROM jsonb_populate_record(NULL::convo.%1$I,
                            convo_private.redact_row(%1$L, to_jsonb(t))))
                         WHERE t.%3$I = $1::%4$s AND to_jsonb(t)::text <> convo_private.redact_row(%1$L, to_jsonb(t))::text',
                       v_place.tab, v_place.cols, v_place.key,
                       CASE WHEN p_conversation_id IS NULL THEN 'text' ELSE 'uuid' END)
        USING CASE WHEN p_conversation_id IS NULL THEN p_owner_id ELSE p_conversation_id::text END;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
            VALUES (p_owner_id, v_erasure, v_place.tab, v_n);
            place := v_place.tab;
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
END;
$$;

-- messages_fill_tree: checks a new message's role and parts and computes its
-- place in the tree (depth, sibling_index, branch_id, created_at) from its
-- parent, whoever inserts it, under the conversation's row lock so that
-- concurrent writers serialize. A new sibling of a message on the live path
-- raises that message's sibling_count in convo.live_path.
CREATE OR REPLACE FUNCTION convo_private.messages_fill_tree()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parent convo.messages;
    -- Where the message was going: a refused message's own id is not named.
    v_where  text := format('a new %s message in conversation %s, parent %s', coalesce(NEW.role, 'NULL'),
                            NEW.conversation_id, coalesce(NEW.parent_id::text, 'none (a root)'));
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.role IS NULL OR NEW.role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'unknown role %', coalesce(quote_literal(NEW.role), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = v_where, HINT = 'Roles are system, user, assistant and tool.';
    END IF;
    PERFORM convo_private.check_parts(NEW.parts, v_where);
    IF NEW.parent_id IS NULL THEN
        NEW.depth := 0;
        SELECT coalesce(max(m.sibling_index), 0) + 1 INTO NEW.sibling_index
          FROM convo.messages m
         WHERE m.conversation_id = NEW.conversation_id AND m.parent_id IS NULL;
        NEW.branch_id := NEW.id;
    ELSE
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        NEW.depth := v_parent.depth + 1;
        SELECT coalesce(max(m.sibling_index), 0) + 1 INTO NEW.sibling_index
          FROM convo.messages m
         WHERE m.conversation_id = NEW.conversation_id AND m.parent_id = NEW.parent_id;
        NEW.branch_id := CASE WHEN NEW.sibling_index = 1 THEN v_parent.branch_id ELSE NEW.id END;
    END IF;
    IF NEW.sibling_index = 1 AND NEW.branch_reason IS NOT NULL THEN
        RAISE EXCEPTION 'a first child has no branch_reason'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, branch_reason %s', v_where, NEW.branch_reason);
    END IF;
    IF NEW.sibling_index > 1 AND NEW.branch_reason IS NULL THEN
        NEW.branch_reason := 'branch';
    END IF;
    IF NEW.sibling_index > 1 THEN
        UPDATE convo.live_path l
           SET sibling_count = NEW.sibling_index, since = clock_timestamp()
         WHERE l.conversation_id = NEW.conversation_id AND l.depth = NEW.depth
           AND (NEW.parent_id IS NULL
                OR EXISTS (SELECT 1 FROM convo.live_path p
                            WHERE p.conversation_id = NEW.conversation_id AND p.depth = NEW.depth - 1
                              AND p.message_id = NEW.parent_id));
    END IF;
    NEW.created_at := clock_timestamp();
    RETURN NEW;
END;
$$;

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment. An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered).
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
BEGIN
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
        v_scope_key := 'rejected:' || encode(sha256(convert_to(NEW.conversation_id || '|' || NEW.tool_call_id, 'UTF8')), 'hex');
    ELSE
        v_scope_key := v_tool.idempotency_scope || ':' || encode(sha256(convert_to(
            CASE v_tool.idempotency_scope
                WHEN 'tool_call' THEN NEW.conversation_id || '|' || NEW.tool_call_id
                WHEN 'conversation_args' THEN NEW.conversation_id || '|' || v_tool.name || '|' || v_input::text
                WHEN 'fork_args' THEN NEW.conversation_id || '|' || coalesce(v_fork::text, 'conversation')
                                      || '|' || v_tool.name || '|' || v_input::text
            END, 'UTF8')), 'hex');
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
        PERFORM convo_private.set_effect_context(NULL, CASE WHEN v_decision = 'rejected'
                                                    THEN jsonb_build_object('errors', to_jsonb(v_errors)) END);
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, deadline_at, settled_at, http_status, error_code)
        VALUES
            (NEW.conversation_id, gen_random_uuid(), v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE v_decision WHEN 'execute' THEN 'pending' WHEN 'confirm' THEN 'awaiting_confirmation' ELSE 'failed' END,
             v_input,
             CASE WHEN jsonb_typeof(v_input -> v_tool.amount_arg) = 'number'
                   AND (v_input ->> v_tool.amount_arg)::numeric = trunc((v_input ->> v_tool.amount_arg)::numeric)
                   AND abs((v_input ->> v_tool.amount_arg)::numeric) < 9e18
                  THEN (v_input ->> v_tool.amount_arg)::numeric::bigint END,
             CASE WHEN v_input ->> v_tool.currency_arg ~ '^[A-Z]{3}$' THEN v_input ->> v_tool.currency_arg END,
             v_repeats,
             clock_timestamp() + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN clock_timestamp() END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.set_effect_context(NULL, NULL);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id)
    VALUES (NEW.conversation_id, NEW.tool_call_id, NEW.message_id, NEW.ordinal, v_effect.id, v_decision, v_fork);
    RETURN NULL;
END;
$$;

-- documented_grants: every privilege pgconvo grants, as data (the README's
-- "Security" section in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's (the allowlist, the
-- sweeps, erasure) for convo_admin, a member of both; SELECT on the views
-- for convo_app, on every table and view for convo_reader. Nothing for
-- PUBLIC, nothing at all on convo_private. A function added later is nobody's until it is listed here.
-- apply_grants makes the catalog say exactly this; self_check compares.
CREATE OR REPLACE FUNCTION convo_private.documented_grants()
RETURNS TABLE (object_kind text, object_name text, grantee text, privilege text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'SCHEMA', 'convo', r.grantee, 'USAGE'
      FROM unnest(ARRAY['convo_app', 'convo_reader', 'convo_admin']) AS r (grantee)
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, g.grantee, 'EXECUTE'
      FROM pg_proc p
      JOIN (VALUES ('convo_app', ARRAY['create_conversation', 'append_message', 'edit_and_resend', 'regenerate',
                                       'move_head', 'path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                       'begin_generation', 'complete_generation', 'fail_generation',
                                       'cancel_generation', 'effect_for_call', 'settle_effect', 'compensate_effect',
                                       'confirm_effect', 'decline_effect', 'begin_receipt', 'fill_receipt',
                                       'apply_receipt', 'fail_receipt', 'args_errors', 'generation_stale_after',
                                       'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                       'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                       'max_ref_length', 'request_messages', 'request_digest']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length', 'request_messages', 'request_digest']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts', 'erase_conversation', 'erase_owner'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace;
END;

-- package_triggers: every trigger pgconvo puts on its tables, by what it
-- guards: append_only (refuse_change, refuse_forgery), head_log (the head
-- log's writer and the guard that names direct updates) and rule (the tree,
-- the state machines, the ledger, the notifications of convo_head and
-- convo_effect). self_check requires each present and
-- ENABLE ALWAYS, and no other trigger on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversation_head_log', 'conversation_head_log_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_no_forgery', 'append_only'),
        ('conversations', 'conversations_no_delete', 'append_only'),
        ('conversations', 'conversations_erasure_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_fixed', 'append_only'),
        ('live_path', 'live_path_no_forgery', 'append_only'),
        ('generations', 'generations_no_delete', 'append_only'),
        ('message_parts', 'message_parts_append_only', 'append_only'),
        ('message_parts', 'message_parts_no_forgery', 'append_only'),
        ('message_parts', 'message_parts_erasure_only', 'append_only'),
        ('messages', 'messages_append_only', 'append_only'),
        ('messages', 'messages_erasure_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_append_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_erasure_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_no_delete', 'append_only'),
        ('tool_effects', 'tool_effects_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_delete', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_forgery', 'append_only'),
        ('erasures', 'erasures_append_only', 'append_only'),
        ('erasures', 'erasures_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_no_forgery', 'append_only'),
        ('tools', 'tools_append_only', 'append_only'),
        ('tools', 'tools_no_forgery', 'append_only'),
        ('conversations', 'conversations_guard', 'head_log'),
        ('conversations', 'conversations_head_log', 'head_log'),
        ('generations', 'generations_transition', 'rule'),
        ('message_parts', 'message_parts_check', 'rule'),
        ('message_parts', 'message_parts_record_tool_call', 'rule'),
        ('messages', 'messages_fill_tree', 'rule'),
        ('messages', 'messages_split_parts', 'rule'),
        ('tool_effects', 'tool_effects_log', 'rule'),
        ('tool_effects', 'tool_effects_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_transition', 'rule'),
        ('conversation_head_log', 'conversation_head_log_notify', 'rule'),
        ('tool_effect_events', 'tool_effect_events_notify', 'rule'),
        ('tool_receipts', 'tool_receipts_notify', 'rule')) AS t (table_name, trigger_name, guards);
END;

-- redact_row: what erasure leaves of a row of a table that holds content,
-- the row given and returned as jsonb: the one place that says what erasure
-- redacts. It keeps the shape (ids, times, states, amounts, currencies,
-- external references, who did what) and empties the content: message parts
-- (the array on the message and each per-part row), conversation metadata,
-- generation params, request digest, usage and error detail, effect
-- arguments, event evidence, a receipt's request, arguments and expected
-- values. Idempotent. erase_content writes it; is_erasure lets only it through.
CREATE OR REPLACE FUNCTION convo_private.redact_row(p_table text, p_row jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN p_row || CASE p_table
    WHEN 'messages' THEN jsonb_build_object('parts',
        (SELECT jsonb_agg(convo_private.redact_part(e.part) ORDER BY e.n)
           FROM jsonb_array_elements(p_row -> 'parts') WITH ORDINALITY AS e (part, n)))
    WHEN 'message_parts' THEN jsonb_build_object('body', convo_private.redact_part(p_row -> 'body'))
    WHEN 'conversations' THEN '{"metadata": {}}'::jsonb
    WHEN 'generations' THEN jsonb_build_object('params', '{}'::jsonb, 'request_digest', NULL,
        'usage', CASE WHEN jsonb_typeof(p_row -> 'usage') <> 'null' THEN '{}'::jsonb END,
        'error', CASE WHEN jsonb_typeof(p_row -> 'error') <> 'null' THEN '{}'::jsonb END)
    WHEN 'tool_effects' THEN '{"arguments": {}}'::jsonb
    WHEN 'tool_effect_events' THEN '{"evidence": {}}'::jsonb
    WHEN 'tool_receipts' THEN jsonb_build_object('request', '{}'::jsonb,
        'arguments', CASE WHEN jsonb_typeof(p_row -> 'arguments') <> 'null' THEN '{}'::jsonb END,
        'expected', CASE WHEN jsonb_typeof(p_row -> 'expected') <> 'null' THEN '{}'::jsonb END)
END;

DROP TRIGGER import_origins_no_forgery ON convo.import_origins;

DROP TRIGGER import_origins_erasure_only ON convo.import_origins;

DROP TRIGGER import_origins_append_only ON convo.import_origins;

DROP FUNCTION convo_private.openwebui_message;

DROP FUNCTION convo_private.openwebui_file;

DROP FUNCTION convo_private.is_imported;

DROP FUNCTION convo_private.import_nodes;

DROP FUNCTION convo_private.epoch_time;

DROP FUNCTION convo_private.chatgpt_is_call;

DROP FUNCTION convo_private.chatgpt_attach;

DROP FUNCTION convo_private.nonempty_text;

DROP FUNCTION convo_private.import_walk;

DROP FUNCTION convo_private.import_tree;

DROP FUNCTION convo_private.import_repeat;

DROP FUNCTION convo_private.check_import_owner;

DROP FUNCTION convo_private.chatgpt_render;

DROP FUNCTION convo_private.chatgpt_message;

DROP FUNCTION convo.import_openwebui;

DROP FUNCTION convo.import_chatgpt;

-- Table changes reversed, below the objects.
DROP TABLE convo.import_origins;

SELECT convo_private.apply_grants();

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
