-- 0004_erasure: erasure that reaches every copy, and the contract's sharp
-- edges. Content is redacted in place, its shape kept, by one recorded path
-- that the append-only and state-machine triggers let through and nothing else.

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

-- The record of every erasure (who, when, why), written before the
-- redaction it authorises: is_erasure lets a redaction through only in the
-- transaction that recorded its erasure here (xact). Owner-scoped.
CREATE TABLE convo.erasures (
    owner_id        text        NOT NULL CHECK (owner_id <> ''),
    id              uuid        NOT NULL,
    conversation_id uuid        REFERENCES convo.conversations (id),
    reason          text        NOT NULL CHECK (btrim(reason) <> ''),
    erased_by       text        NOT NULL DEFAULT session_user,
    erased_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    xact            xid8        NOT NULL DEFAULT pg_current_xact_id(),
    PRIMARY KEY (owner_id, id)
);
CREATE INDEX erasures_xact_idx ON convo.erasures (xact);
CREATE INDEX erasures_conversation_idx ON convo.erasures (conversation_id);
COMMENT ON TABLE convo.erasures IS 'Every erasure (who, when, why), a repeat too; append-only.';

-- How many rows each erasure redacted, per place (table).
CREATE TABLE convo.erasure_places (
    owner_id      text   NOT NULL,
    erasure_id    uuid   NOT NULL,
    place         text   NOT NULL,
    rows_redacted bigint NOT NULL CHECK (rows_redacted > 0),
    PRIMARY KEY (owner_id, erasure_id, place),
    FOREIGN KEY (owner_id, erasure_id) REFERENCES convo.erasures (owner_id, id)
);
COMMENT ON TABLE convo.erasure_places IS 'Rows redacted by each erasure, per table; append-only.';

ALTER TABLE convo.erasures ENABLE ROW LEVEL SECURITY;
CREATE POLICY erasures_reader_reads_all ON convo.erasures FOR SELECT TO convo_reader USING (true);
ALTER TABLE convo.erasure_places ENABLE ROW LEVEL SECURITY;
CREATE POLICY erasure_places_reader_reads_all ON convo.erasure_places FOR SELECT TO convo_reader USING (true);

-- Objects: current text in sql/functions, sql/private, sql/views and sql/triggers.
-- erase_conversation: removes every copy of a conversation's content (see
-- redact_row) and keeps its shape: the tree, the head log and the ledger
-- stay whole and reconcilable. Recorded in convo.erasures (who, when, why)
-- and convo.erasure_places (rows per place), a repeat too. convo_admin's.
CREATE OR REPLACE FUNCTION convo.erase_conversation(p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner text;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT c.owner_id INTO v_owner FROM convo.conversations c WHERE c.id = p_conversation_id;
    RETURN QUERY SELECT * FROM convo_private.erase_content(v_owner, p_conversation_id, p_reason);
END;
$$;

COMMENT ON FUNCTION convo.erase_conversation(uuid, text) IS
    'Erase a conversation''s content everywhere it is stored, keeping its shape; recorded with p_reason. Returns rows per place.';

-- erase_owner: erase_conversation for every conversation of an owner, and
-- the owner's receipts (request, arguments, expected values), in one
-- transaction; each conversation's erasure and the receipts' are recorded
-- on their own. An owner with nothing stored is not an error. convo_admin's.
CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s', p_owner_id);
    END IF;
    -- Lock the owner's conversations in one order, as every writer would.
    PERFORM 1 FROM convo.conversations c WHERE c.owner_id = p_owner_id ORDER BY c.id FOR NO KEY UPDATE;
    RETURN QUERY
    SELECT e.place, sum(e.rows_redacted)::bigint
      FROM (SELECT x.* FROM convo.conversations c
                  CROSS JOIN LATERAL convo_private.erase_content(p_owner_id, c.id, p_reason) x
             WHERE c.owner_id = p_owner_id
            UNION ALL
            SELECT y.* FROM convo_private.erase_content(p_owner_id, NULL, p_reason) y) e
     GROUP BY e.place
     ORDER BY e.place;
END;
$$;

COMMENT ON FUNCTION convo.erase_owner(text, text) IS
    'Erase the content of every conversation and receipt of an owner, keeping their shape; recorded with p_reason.';

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
                        'erasures', 'erasure_places']) AS t (name)
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

-- conversations_guard: of a conversation only the head may change, and its
-- metadata by an erasure (is_erasure, which runs as the owner role); its id,
-- owner and creation time are fixed, and a head once set is never unset
-- (the head always names a message).
-- It runs as the role that issued the UPDATE (not SECURITY DEFINER), so it
-- can tell pgconvo's own move (current_user convo_owner, reason and mover
-- named by move_head_to) from any other: that one is marked direct_update by
-- session_user here, whatever settings the session holds, for log_head_move.
CREATE OR REPLACE FUNCTION convo_private.conversations_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'a conversation''s id, owner_id and created_at never change'
            USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id);
    END IF;
    -- Nested, so that only the owner role ever reaches the private call.
    IF NEW.metadata::text <> OLD.metadata::text THEN
        IF current_user <> 'convo_owner' THEN
            RAISE EXCEPTION 'a conversation''s metadata changes only by erasure'
                USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id),
                      HINT = 'convo.erase_conversation and convo.erase_owner redact it.';
        END IF;
        IF NOT convo_private.is_erasure('conversations', to_jsonb(OLD), to_jsonb(NEW)) THEN
            RAISE EXCEPTION 'a conversation''s metadata changes only by erasure'
                USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id),
                      HINT = 'convo.erase_conversation and convo.erase_owner redact it.';
        END IF;
    END IF;
    IF OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL THEN
        RAISE EXCEPTION 'the head of a conversation cannot be unset'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, head %s', OLD.id, OLD.head_message_id);
    END IF;
    IF NEW.head_message_id IS DISTINCT FROM OLD.head_message_id AND current_user <> 'convo_owner' THEN
        PERFORM set_config('convo.head_reason', 'direct_update', true);
        PERFORM set_config('convo.head_moved_by', session_user, true);
    END IF;
    RETURN NEW;
END;
$$;

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
    v_counts  jsonb := '{}';
    v_n       bigint;
BEGIN
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    IF p_conversation_id IS NULL THEN
        UPDATE convo.tool_receipts t SET (request, arguments, expected) =
               (SELECT r.request, r.arguments, r.expected
                  FROM jsonb_populate_record(NULL::convo.tool_receipts, convo_private.redact_row('tool_receipts', to_jsonb(t))) r)
         WHERE t.owner_id = p_owner_id
           AND to_jsonb(t)::text <> convo_private.redact_row('tool_receipts', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('tool_receipts', v_n);
    ELSE
        UPDATE convo.messages t SET parts = convo_private.redact_row('messages', to_jsonb(t)) -> 'parts'
         WHERE t.conversation_id = p_conversation_id
           AND to_jsonb(t)::text <> convo_private.redact_row('messages', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('messages', v_n);

        UPDATE convo.message_parts t SET body = convo_private.redact_row('message_parts', to_jsonb(t)) -> 'body'
         WHERE t.conversation_id = p_conversation_id
           AND to_jsonb(t)::text <> convo_private.redact_row('message_parts', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('message_parts', v_n);

        UPDATE convo.conversations t SET metadata = '{}'
         WHERE t.id = p_conversation_id AND t.metadata::text <> '{}';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('conversations', v_n);

        UPDATE convo.generations t SET (params, request_digest, usage, error) =
               (SELECT r.params, r.request_digest, r.usage, r.error
                  FROM jsonb_populate_record(NULL::convo.generations, convo_private.redact_row('generations', to_jsonb(t))) r)
         WHERE t.conversation_id = p_conversation_id
           AND to_jsonb(t)::text <> convo_private.redact_row('generations', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('generations', v_n);

        UPDATE convo.tool_effects t SET arguments = '{}'
         WHERE t.conversation_id = p_conversation_id AND t.arguments::text <> '{}';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('tool_effects', v_n);

        UPDATE convo.tool_effect_events t SET evidence = '{}'
         WHERE t.conversation_id = p_conversation_id AND t.evidence::text <> '{}';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('tool_effect_events', v_n);
    END IF;

    INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
    SELECT p_owner_id, v_erasure, c.key, c.value::bigint
      FROM jsonb_each_text(v_counts) c
     WHERE c.value::bigint > 0;
    RETURN QUERY SELECT c.key, c.value::bigint FROM jsonb_each_text(v_counts) c WHERE c.value::bigint > 0 ORDER BY c.key;
END;
$$;

-- generations_transition: a generation starts streaming and ends once:
-- streaming to completed, failed or cancelled, and an ended generation never
-- changes; its identity (prompt, model, params, digest, start) never changes
-- at all, and its answer is an assistant child of its prompt. CV006. An
-- erasure (is_erasure) empties its params, digest, usage and error detail.
CREATE OR REPLACE FUNCTION convo_private.generations_transition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'streaming' THEN
            RAISE EXCEPTION 'a generation starts streaming, not %', NEW.state
                USING ERRCODE = 'CV006', DETAIL = format('generation %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state = OLD.state AND convo_private.is_erasure('generations', to_jsonb(OLD), to_jsonb(NEW)) THEN
        RETURN NEW;
    END IF;
    IF (NEW.conversation_id, NEW.id, NEW.prompt_message_id, NEW.head_at_begin, NEW.model, NEW.params::text,
        NEW.request_digest, NEW.started_at)
       IS DISTINCT FROM
       (OLD.conversation_id, OLD.id, OLD.prompt_message_id, OLD.head_at_begin, OLD.model, OLD.params::text,
        OLD.request_digest, OLD.started_at) THEN
        RAISE EXCEPTION 'a generation''s prompt, model, params, digest and start never change'
            USING ERRCODE = 'CV006', DETAIL = format('generation %s', OLD.id);
    END IF;
    IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text AND NOT (OLD.state = 'streaming' AND NEW.state IN ('completed', 'failed', 'cancelled')) THEN
        RAISE EXCEPTION 'a generation cannot go from % to %', OLD.state, NEW.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s', OLD.id),
                  HINT = 'A generation goes from streaming to completed, failed or cancelled, once.';
    END IF;
    IF NEW.state = 'completed' AND OLD.state = 'streaming'
       AND NOT EXISTS (SELECT 1 FROM convo.messages m
                        WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.message_id
                          AND m.parent_id = NEW.prompt_message_id AND m.role = 'assistant') THEN
        RAISE EXCEPTION 'a completed generation''s message is an assistant answer to its prompt'
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, message %s, prompt %s', OLD.id, NEW.message_id, OLD.prompt_message_id);
    END IF;
    RETURN NEW;
END;
$$;

-- refuse_all_but_erasure: the row-level UPDATE guard of the append-only
-- tables that hold content (messages, message_parts, tool_effect_events):
-- every UPDATE raises CV005, for every role, unless it is an erasure
-- (is_erasure: exactly the redaction, in a transaction that recorded it).
CREATE OR REPLACE FUNCTION convo_private.refuse_all_but_erasure()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF convo_private.is_erasure(TG_TABLE_NAME, to_jsonb(OLD), to_jsonb(NEW)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'convo.% is append-only: UPDATE is not allowed', TG_TABLE_NAME
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, conversation %s, role %s', TG_TABLE_NAME, OLD.conversation_id, current_user),
              HINT = 'Nothing in the conversation tree is updated: insert a sibling or move the head instead; '
                     'content is removed only by convo.erase_conversation or convo.erase_owner.';
END;
$$;

-- tool_effects_transition: the effect state machine, for every statement.
-- A new effect starts in a state reachable from 'requested'; a change of
-- state must be a row of effect_transitions and may set only the columns
-- that row names; without a change of state nothing changes. CV006 otherwise.
-- Rows are compared by their text, since jsonb's = calls 500 and 500.000 equal.
-- An erasure (is_erasure) empties the arguments and changes nothing else.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_from    text := CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END;
    v_changes text[];
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text
           AND NOT convo_private.is_erasure('tool_effects', to_jsonb(OLD), to_jsonb(NEW)) THEN
            RAISE EXCEPTION 'effect % changes only by a transition of its state', OLD.id
                USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s', OLD.id, OLD.state);
        END IF;
        RETURN NEW;
    END IF;
    SELECT t.changes INTO v_changes FROM convo.effect_transitions t
     WHERE t.from_state = v_from AND t.to_state = NEW.state;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'an effect cannot go from % to %', v_from, NEW.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, %s to %s', NEW.id, v_from, NEW.state),
                  HINT = 'The transitions are listed in convo.effect_transitions.';
    END IF;
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - v_changes - 'state')::text <> (to_jsonb(OLD) - v_changes - 'state')::text THEN
        RAISE EXCEPTION 'the transition % to % may change only %', OLD.state, NEW.state, array_to_string(v_changes, ', ')
            USING ERRCODE = 'CV006', DETAIL = format('effect %s', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

-- tool_receipts_transition: a receipt is filed pending and ends once, applied
-- or failed; its owner, key, tool and request never change, its arguments
-- are filled once and are valid only if they pass receipt_arguments_error,
-- and a settled receipt never changes (compared as text: jsonb's = calls 500
-- and 500.000 equal). CV006. An erasure of its owner (is_erasure) empties
-- its request, arguments and expected values.
CREATE OR REPLACE FUNCTION convo_private.tool_receipts_transition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.arguments IS NOT NULL THEN
            RAISE EXCEPTION 'a receipt is filed pending and unfilled'
                USING ERRCODE = 'CV006', DETAIL = format('receipt %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF to_jsonb(NEW)::text = to_jsonb(OLD)::text
       OR (NEW.status = OLD.status AND convo_private.is_erasure('tool_receipts', to_jsonb(OLD), to_jsonb(NEW))) THEN
        RETURN NEW;
    END IF;
    IF OLD.status <> 'pending'
       OR (NEW.id, NEW.owner_id, NEW.idempotency_key, NEW.tool_name, NEW.tool_version, NEW.request::text,
           NEW.request_digest, NEW.created_at, NEW.deadline_at)
          IS DISTINCT FROM
          (OLD.id, OLD.owner_id, OLD.idempotency_key, OLD.tool_name, OLD.tool_version, OLD.request::text,
           OLD.request_digest, OLD.created_at, OLD.deadline_at)
       OR (OLD.arguments IS NOT NULL
           AND (NEW.arguments::text, NEW.expected::text, NEW.arguments_valid, NEW.filled_at)
               IS DISTINCT FROM (OLD.arguments::text, OLD.expected::text, OLD.arguments_valid, OLD.filled_at)) THEN
        RAISE EXCEPTION 'receipt % is %: this change is not a transition it allows', OLD.id, OLD.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, %s to %s', OLD.id, OLD.status, NEW.status),
                  HINT = 'A receipt goes from pending to applied or failed, once; its arguments are filled once.';
    END IF;
    IF NEW.arguments_valid AND OLD.arguments IS NULL
       AND convo_private.receipt_arguments_error(NEW.tool_name, NEW.tool_version, NEW.arguments, NEW.expected) IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % arguments are marked valid but fail its tool version or the expected values', OLD.id
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, tool %s version %s', OLD.id, OLD.tool_name, OLD.tool_version);
    END IF;
    RETURN NEW;
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
                                       'max_ref_length']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length']),
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

-- redact_part: what erasure leaves of one message part: its type, its ids
-- (a tool call's id and tool name, a result's tool_use_id and is_error) and
-- the keys that keep it well formed, emptied, with "erased": true. Every
-- other key goes. Idempotent, so a second erasure changes nothing.
CREATE OR REPLACE FUNCTION convo_private.redact_part(p_part jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN CASE p_part ->> 'type'
    WHEN 'text' THEN jsonb_build_object('type', 'text', 'text', '')
    WHEN 'tool_use' THEN jsonb_build_object('type', 'tool_use', 'id', p_part -> 'id', 'name', p_part -> 'name',
                                            'input', '{}'::jsonb)
    WHEN 'tool_result' THEN jsonb_build_object('type', 'tool_result', 'tool_use_id', p_part -> 'tool_use_id',
                                               'content', '')
                            || CASE WHEN p_part ? 'is_error' THEN jsonb_build_object('is_error', p_part -> 'is_error')
                                    ELSE '{}' END
    WHEN 'attachment' THEN jsonb_build_object('type', 'attachment', 'uri', '', 'media_type', p_part -> 'media_type')
    ELSE jsonb_build_object('type', p_part -> 'type')
END || '{"erased": true}';

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

-- is_erasure: whether an UPDATE of a row is an erasure: the new row is
-- exactly redact_row of the old one, and this very transaction recorded an
-- erasure of the row's conversation (or, for a receipt, of its owner) in
-- convo.erasures, which only erase_conversation and erase_owner write. No
-- setting or argument can make it true: it is the one way past the
-- append-only and state-machine triggers.
CREATE OR REPLACE FUNCTION convo_private.is_erasure(p_table text, p_old jsonb, p_new jsonb)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN p_new::text = convo_private.redact_row(p_table, p_old)::text
   AND EXISTS (SELECT 1 FROM convo.erasures e
                WHERE e.xact = pg_current_xact_id()
                  AND CASE WHEN p_table = 'tool_receipts'
                           THEN e.conversation_id IS NULL AND e.owner_id = p_old ->> 'owner_id'
                           ELSE e.conversation_id = (CASE p_table WHEN 'conversations' THEN p_old ->> 'id'
                                                                  ELSE p_old ->> 'conversation_id' END)::uuid
                      END);

-- package_triggers: every trigger pgconvo puts on its tables, by what it
-- guards: append_only (refuse_change, refuse_forgery), head_log (the head
-- log's writer and the guard that names direct updates) and rule (the tree,
-- the state machines, the ledger). self_check requires each present and
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
        ('effect_transitions', 'effect_transitions_fixed', 'append_only'),
        ('generations', 'generations_no_delete', 'append_only'),
        ('message_parts', 'message_parts_append_only', 'append_only'),
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
        ('tool_receipts', 'tool_receipts_transition', 'rule')) AS t (table_name, trigger_name, guards);
END;

-- erasure_places_append_only: the record of erasures is itself append-only: UPDATE,
-- DELETE and TRUNCATE raise CV005 for every role but a superuser.
CREATE OR REPLACE TRIGGER erasure_places_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasure_places
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_append_only;

-- erasure_places_no_forgery: only erase_conversation and erase_owner record an
-- erasure (refuse_forgery), and a recorded erasure is what lets the
-- redaction past the append-only triggers; any other role gets CV005.
CREATE OR REPLACE TRIGGER erasure_places_no_forgery
    BEFORE INSERT ON convo.erasure_places
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_no_forgery;

-- erasures_append_only: the record of erasures is itself append-only: UPDATE,
-- DELETE and TRUNCATE raise CV005 for every role but a superuser.
CREATE OR REPLACE TRIGGER erasures_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasures
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_append_only;

-- erasures_no_forgery: only erase_conversation and erase_owner record an
-- erasure (refuse_forgery), and a recorded erasure is what lets the
-- redaction past the append-only triggers; any other role gets CV005.
CREATE OR REPLACE TRIGGER erasures_no_forgery
    BEFORE INSERT ON convo.erasures
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_no_forgery;

-- message_parts_append_only: rows of convo.message_parts are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is message_parts_erasure_only's.
CREATE OR REPLACE TRIGGER message_parts_append_only
    BEFORE DELETE OR TRUNCATE ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_append_only;

-- message_parts_erasure_only: no row of convo.message_parts is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER message_parts_erasure_only
    BEFORE UPDATE ON convo.message_parts
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_erasure_only;

-- messages_append_only: rows of convo.messages are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is messages_erasure_only's.
CREATE OR REPLACE TRIGGER messages_append_only
    BEFORE DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_append_only;

-- messages_erasure_only: no row of convo.messages is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER messages_erasure_only
    BEFORE UPDATE ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_erasure_only;

-- tool_effect_events_append_only: rows of convo.tool_effect_events are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is tool_effect_events_erasure_only's.
CREATE OR REPLACE TRIGGER tool_effect_events_append_only
    BEFORE DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_append_only;

-- tool_effect_events_erasure_only: no row of convo.tool_effect_events is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER tool_effect_events_erasure_only
    BEFORE UPDATE ON convo.tool_effect_events
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_erasure_only;

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
