-- 0031_views_barrier_and_head_guard: the owner-filtered views become security
-- barriers (a caller's function no longer sees other owners' rows); a head, a
-- parent and a generation's prompt stay in their conversation in replica mode
-- too, and a generation written outside the API names no import; erase_owner
-- checks its caller's owner; self_check gains foreign_keys_hold and
-- views_security_barrier.

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

-- Table changes, written by hand, go here, above the objects that use them.

-- erase_owner: erase_conversation for every conversation of an owner, and
-- the owner's receipts (request, arguments, expected values), in one
-- transaction; each conversation's erasure and the receipts' are recorded
-- on their own. An owner with nothing stored is not an error. convo_admin's;
-- the caller (convo_private.caller, not a SECURITY DEFINER helper's owner)
-- must be one that may write for the owner, else CV011.
CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL or empty';
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    -- The caller may erase only an owner it may write for (writes_owner:
    -- every owner for convo_admin, else the one its session set), as
    -- erase_conversation may erase only such a conversation; checked before
    -- any lock is taken. CV011, as begin_receipt answers another owner.
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not erase owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Erase as a member of convo_admin, or set convo.owner_id to the owner erased.';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s', p_owner_id);
    END IF;
    -- Lock the owner's conversations in one order, each by its key, as every
    -- writer would.
    FOR v_id IN SELECT c.id FROM convo.conversations c WHERE c.owner_id = p_owner_id ORDER BY c.id LOOP
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
    END LOOP;
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
-- every row of the package once per check (foreign_keys_hold: each table once
-- per foreign key it holds): run it from a maintenance job or `migrate
-- verify`, not from a request.
CREATE OR REPLACE FUNCTION convo.self_check()
RETURNS TABLE (check_name text, ok boolean, detail text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad   text[];
    v_found text[];
    v_key   record;
BEGIN
    -- Triggers: each of the package's present and ENABLE ALWAYS (so neither
    -- session_replication_role nor a plain ENABLE skips it), by what it
    -- guards; a view's trigger present and enabled (a view cannot be
    -- written in replica mode anyway: its INSERT writes nothing).
    FOR check_name, v_bad IN
        SELECT g.guards, array_agg(g.table_name || '.' || g.trigger_name || ' '
                                   || CASE WHEN tg.oid IS NULL THEN 'missing' ELSE 'enabled=' || tg.tgenabled::text END
                                   ORDER BY g.table_name, g.trigger_name)
                             FILTER (WHERE tg.oid IS NULL OR (tg.tgenabled <> 'A' AND NOT (rel.relkind = 'v' AND tg.tgenabled = 'O')))
          FROM convo_private.package_triggers() g
          LEFT JOIN pg_class rel ON rel.oid = to_regclass('convo.' || g.table_name)
          LEFT JOIN pg_trigger tg ON tg.tgname = g.trigger_name AND tg.tgrelid = rel.oid
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

    -- Every foreign key of the package holds on every row: a head, a
    -- head-log row, a parent, a generation's prompt names a message of its
    -- own conversation, an effect its tool version, and so on. A session in
    -- session_replication_role = replica skips foreign-key checks (the
    -- guards, ENABLE ALWAYS, still run), as does a superuser's DISABLE
    -- TRIGGER ALL: a row that got past shows here. One anti-join a key, read
    -- from the catalog, so a key added later is covered.
    v_bad := NULL;
    FOR v_key IN
        SELECT con.conname, con.conrelid::regclass::text AS child, con.confrelid::regclass::text AS parent,
               string_agg(quote_ident(ca.attname), ', ' ORDER BY k.n) AS child_cols,
               string_agg(quote_ident(pa.attname), ', ' ORDER BY k.n) AS parent_cols,
               string_agg('c.' || quote_ident(ca.attname), ', ' ORDER BY k.n) AS c_cols,
               string_agg('p.' || quote_ident(pa.attname), ', ' ORDER BY k.n) AS p_cols
          FROM pg_constraint con
         CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k (child_att, parent_att, n)
          JOIN pg_attribute ca ON ca.attrelid = con.conrelid AND ca.attnum = k.child_att
          JOIN pg_attribute pa ON pa.attrelid = con.confrelid AND pa.attnum = k.parent_att
         WHERE con.contype = 'f' AND con.connamespace = 'convo'::regnamespace
         GROUP BY con.oid, con.conname, con.conrelid, con.confrelid
         ORDER BY 2, 1
    LOOP
        -- A key with a NULL column references nothing (MATCH SIMPLE).
        EXECUTE format('SELECT array_agg(%L || '' = '' || x.k || '' names no row of '' || %L ORDER BY x.k)
                          FROM (SELECT ROW(%s)::text AS k FROM %s c
                                 WHERE ROW(%s) IS NOT NULL
                                   AND NOT EXISTS (SELECT 1 FROM %s p WHERE (%s) = (%s))
                                 ORDER BY 1 LIMIT 10) x',
                       v_key.child || ' (' || v_key.child_cols || ')', v_key.parent || ' (' || v_key.parent_cols || ')',
                       v_key.c_cols, v_key.child, v_key.c_cols, v_key.parent, v_key.p_cols, v_key.c_cols)
           INTO v_found;
        v_bad := v_bad || v_found;
    END LOOP;
    RETURN QUERY SELECT 'foreign_keys_hold', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every reference names its row');

    -- The live-path index (convo.live_path, what path reads) holds exactly
    -- the segments of the path from the root to each head (each branch it
    -- runs through, from where the branch starts to the deepest of it on
    -- the path), walked from the tree here. Repair:
    -- convo_private.rebuild_live_path(id).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ': ' || d.n || ' live_path rows differ from the path to its head' AS id
          FROM convo.conversations c
         CROSS JOIN LATERAL (
               SELECT count(*) AS n
                 FROM (SELECT s.branch_id, b.depth AS min_depth, s.max_depth
                         FROM convo_private.path_segments(c.id, c.head_message_id) s
                         JOIN convo.messages b ON b.conversation_id = c.id AND b.id = s.branch_id) p
                 FULL JOIN (SELECT l.* FROM convo.live_path l WHERE l.conversation_id = c.id) l ON l.branch_id = p.branch_id
                WHERE (p.min_depth, p.max_depth) IS DISTINCT FROM (l.min_depth, l.max_depth)) d
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
          JOIN convo.keyed_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
         WHERE p.type <> 'tool_use' OR p.tool_call_id <> l.tool_call_id
            OR (e.id IS NOT NULL AND e.tool_name <> p.tool_name)) x;
    RETURN QUERY SELECT 'effects_linked', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every effect and link is consistent');

    -- Every ledger row is one the API could have written (ledger_problems):
    -- decisions that follow from the tool version, links within a scope,
    -- effects that their creating call explains. Written by hand past the
    -- API (a superuser, an import of old), a row shows here.
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        SELECT 'conversation ' || p.conversation_id || ', ' || p.row_name || ': ' || p.problem AS d
          FROM convo_private.ledger_problems(NULL) p) x;
    RETURN QUERY SELECT 'ledger_as_written', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every decision, link and effect is one the API writes');

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

    -- Row-level security on every owner-scoped table: each table of convo
    -- with a conversation_id or owner_id column, so a table added later is
    -- covered without a list to keep. It is enabled, not forced: the API
    -- functions run as the owner role and check the owner once per call
    -- (sees_owner, writes_owner), which keeps the path at the cost of a flat
    -- read; any other role is bound by the policies.
    SELECT array_agg(c.relname::text ORDER BY c.relname) INTO v_bad
      FROM pg_class c
     WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('r', 'p')
       AND EXISTS (SELECT 1 FROM pg_attribute a
                    WHERE a.attrelid = c.oid AND a.attname IN ('conversation_id', 'owner_id') AND NOT a.attisdropped)
       AND NOT c.relrowsecurity;
    RETURN QUERY SELECT 'row_level_security', v_bad IS NULL,
                        coalesce('not enabled on ' || array_to_string(v_bad, ', '),
                                 'enabled on every owner-scoped table');

    -- Every view a role other than its owner may read keeps the reader's
    -- conditions above its own (security_barrier) or reads with the
    -- reader's rights, under row-level security (security_invoker): a view
    -- that runs as its owner and filters by owner in its WHERE clause would
    -- otherwise let a caller's cheap function (any role may create one in
    -- pg_temp) run below that filter, on every owner's rows.
    SELECT array_agg(c.relname::text ORDER BY c.relname) INTO v_bad
      FROM pg_class c
     WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind = 'v'
       AND (EXISTS (SELECT 1 FROM aclexplode(c.relacl) a
                     WHERE a.grantee <> c.relowner AND a.privilege_type = 'SELECT')
            OR EXISTS (SELECT 1 FROM pg_attribute att CROSS JOIN LATERAL aclexplode(att.attacl) a
                        WHERE att.attrelid = c.oid AND a.grantee <> c.relowner AND a.privilege_type = 'SELECT'))
       AND NOT EXISTS (SELECT 1 FROM pg_options_to_table(c.reloptions) o
                        WHERE o.option_name IN ('security_barrier', 'security_invoker') AND o.option_value::boolean);
    RETURN QUERY SELECT 'views_security_barrier', v_bad IS NULL,
                        coalesce('readable by other roles, neither security_barrier nor security_invoker: '
                                 || array_to_string(v_bad, ', '),
                                 'every view other roles read is a security barrier or reads with the reader''s rights');

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

-- conversations_head_guard: a head moved outside pgconvo's code names a
-- message of its own conversation (message_ref: CV003 for a message of
-- another conversation the caller sees, CV002 for one it does not see, or
-- none). The foreign key says the same, but a session in
-- session_replication_role = replica (a role a DBA let SET it, no superuser
-- needed) skips foreign keys, and not this ENABLE ALWAYS trigger; the head
-- log and the live path then record only heads it let through. pgconvo's
-- own moves name a message they have just found or written, and skip it in
-- its WHEN. SECURITY DEFINER: a role granted UPDATE alone meets the rule,
-- not a missing privilege.
CREATE OR REPLACE FUNCTION convo_private.conversations_head_guard()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- An unset head is conversations_guard's to refuse.
    IF NEW.head_message_id IS NOT NULL THEN
        PERFORM convo_private.message_ref(NEW.id, NEW.head_message_id);
    END IF;
    RETURN NEW;
END;
$$;

-- generations_transition: a generation starts streaming and ends once:
-- streaming to completed, failed or cancelled, and an ended generation
-- never changes; its identity (prompt, model, params, digest, start) never
-- changes at all, nor does its import, and its answer is an assistant child
-- of its prompt. CV006. A new one's prompt and starting head are messages
-- of its conversation (CV003, CV002), and it names no import (CV011). It
-- guards every write outside pgconvo's code (whose entries, and erasure,
-- write only such rows).
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
        -- Its prompt and the head it began at are messages of its own
        -- conversation (message_ref: CV003 or CV002), in replica mode too,
        -- which skips the foreign keys that say so. A NULL prompt is left
        -- to its NOT NULL.
        IF NEW.prompt_message_id IS NOT NULL THEN
            PERFORM convo_private.message_ref(NEW.conversation_id, NEW.prompt_message_id);
        END IF;
        IF NEW.head_at_begin IS NOT NULL THEN
            PERFORM convo_private.message_ref(NEW.conversation_id, NEW.head_at_begin);
        END IF;
        -- A restored row comes only from import_conversation, pgconvo's.
        IF NEW.import_id IS NOT NULL THEN
            RAISE EXCEPTION 'a generation written outside the API is not restored from an import'
                USING ERRCODE = 'CV011', DETAIL = format('generation %s, import %s', NEW.id, NEW.import_id),
                      HINT = 'Restore generations with convo.import_conversation.';
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.conversation_id, NEW.id, NEW.prompt_message_id, NEW.head_at_begin, NEW.model, NEW.params::text,
        NEW.request_digest, NEW.started_at, NEW.import_id)
       IS DISTINCT FROM
       (OLD.conversation_id, OLD.id, OLD.prompt_message_id, OLD.head_at_begin, OLD.model, OLD.params::text,
        OLD.request_digest, OLD.started_at, OLD.import_id) THEN
        RAISE EXCEPTION 'a generation''s prompt, model, params, digest, start and import never change'
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

-- messages_guard: a message inserted outside pgconvo's code (a DBA's
-- repair, as a superuser or a role granted INSERT) must be one
-- write_messages could have written: in a conversation the writer may write
-- for, under its lock (so it serializes with the API), with the depth,
-- sibling position and branch the tree gives it, no import, a time neither
-- before its parent's nor after now, well-formed parts (part_problem), and
-- none addressed by key (a tool call, result or attachment needs its keyed
-- row and its ledger decision: write those through the API). It computes
-- nothing; it refuses. Its parent is a message of its conversation
-- (message_ref: CV003 or CV002) in replica mode too, which skips the
-- foreign key. SECURITY DEFINER, so that a role granted INSERT meets these
-- rules rather than a missing privilege on pgconvo's functions; the owner
-- checks read the caller from the session (convo_private.caller), not
-- current_user.
CREATE OR REPLACE FUNCTION convo_private.messages_guard()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parent  convo.messages;
    v_last    int;
    v_branch  uuid;
    v_problem text[];
    v_where   text := format('a new %s message in conversation %s, parent %s', coalesce(NEW.role, 'NULL'),
                             NEW.conversation_id, coalesce(NEW.parent_id::text, 'none (a root)'));
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.parent_id IS NOT NULL THEN
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        v_last := (SELECT s.sibling_index FROM convo.messages s
                    WHERE s.conversation_id = NEW.conversation_id AND s.parent_id = NEW.parent_id
                    ORDER BY s.sibling_index DESC LIMIT 1);
    ELSE
        v_last := (SELECT s.sibling_index FROM convo.messages s
                    WHERE s.conversation_id = NEW.conversation_id AND s.parent_id IS NULL
                    ORDER BY s.parent_id DESC, s.sibling_index DESC LIMIT 1);
    END IF;
    v_last := coalesce(v_last, 0);
    v_branch := CASE WHEN NEW.parent_id IS NOT NULL AND v_last = 0 THEN v_parent.branch_id ELSE NEW.id END;
    IF NEW.depth IS DISTINCT FROM coalesce(v_parent.depth + 1, 0) OR NEW.sibling_index IS DISTINCT FROM v_last + 1
       OR NEW.branch_id IS DISTINCT FROM v_branch OR NEW.import_id IS NOT NULL
       OR NEW.created_at > clock_timestamp() OR NEW.created_at < v_parent.created_at THEN
        RAISE EXCEPTION 'a message written outside the API must be placed as the tree places it'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s: depth %s, sibling_index %s, branch_id %s, no import_id, created_at from %s to now',
                                  v_where, coalesce(v_parent.depth + 1, 0), v_last + 1, v_branch,
                                  coalesce(v_parent.created_at::text, '-infinity')),
                  HINT = 'Write messages through convo.append_message, edit_and_resend or regenerate, which place them.';
    END IF;
    IF NEW.parts IS NULL OR jsonb_typeof(NEW.parts) <> 'array' OR jsonb_array_length(NEW.parts) = 0
       OR octet_length(NEW.parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'p_parts must be a non-empty JSON array of at most % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV008', DETAIL = v_where;
    END IF;
    SELECT p.problem INTO v_problem
      FROM jsonb_array_elements(NEW.parts) WITH ORDINALITY AS e (part, n),
           LATERAL (SELECT CASE WHEN e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment')
                                THEN ARRAY['CV008', format('a %s part is written through the API only', e.part ->> 'type'),
                                           format(', part %s', e.n - 1),
                                           'It needs its keyed row and, for a tool call, its ledger decision.']
                                ELSE convo_private.part_problem(e.part, NEW.role) END AS problem) p
     WHERE p.problem IS NOT NULL
     ORDER BY e.n LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%', v_problem[2]
            USING ERRCODE = v_problem[1], DETAIL = v_where || v_problem[3], HINT = v_problem[4];
    END IF;
    RETURN NEW;
END;
$$;

-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), by what it guards: append_only (refuse_change,
-- refuse_forgery), head_log (the conversation's guards and the logging of
-- direct head, title and archive updates) and rule (the tree's and the
-- ledger's guards, the state machines). Each table's triggers are numbered
-- in the order they fire (PostgreSQL fires the triggers of one timing, event
-- and level by name): 10 and 11 who may write and what a new or changed row
-- may hold, 20 what a row must be (or, after the write, its log), 30 an
-- UPDATE refused or logged, 90 append-only. self_check requires each present and
-- ENABLE ALWAYS (a view's are enabled as views allow), and no other trigger
-- on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversations', 'conversations_10_guard', 'head_log'),
        ('conversations', 'conversations_11_new_guard', 'head_log'),
        ('conversations', 'conversations_12_head_guard', 'head_log'),
        ('conversations', 'conversations_20_log_direct', 'head_log'),
        ('conversations', 'conversations_21_log_direct_change', 'head_log'),
        ('conversations', 'conversations_90_no_delete', 'append_only'),
        ('conversation_changes', 'conversation_changes_10_no_forgery', 'append_only'),
        ('conversation_changes', 'conversation_changes_30_no_update', 'append_only'),
        ('conversation_changes', 'conversation_changes_90_append_only', 'append_only'),
        ('messages', 'messages_20_guard', 'rule'),
        ('messages', 'messages_30_no_update', 'append_only'),
        ('messages', 'messages_90_append_only', 'append_only'),
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only'),
        ('keyed_parts', 'keyed_parts_20_guard', 'rule'),
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only'),
        ('live_path', 'live_path_10_no_forgery', 'append_only'),
        ('generations', 'generations_20_transition', 'rule'),
        ('generations', 'generations_90_no_delete', 'append_only'),
        ('tools', 'tools_10_no_forgery', 'append_only'),
        ('tools', 'tools_90_append_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_90_fixed', 'append_only'),
        ('tool_effects', 'tool_effects_10_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_20_transition', 'rule'),
        ('tool_effects', 'tool_effects_30_log_direct', 'rule'),
        ('tool_effects', 'tool_effects_90_no_delete', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_10_no_forgery', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_90_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_10_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_30_no_update', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_90_append_only', 'append_only'),
        ('tool_receipts', 'tool_receipts_10_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_20_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_90_no_delete', 'append_only'),
        ('erasures', 'erasures_10_no_forgery', 'append_only'),
        ('erasures', 'erasures_90_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_10_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_90_append_only', 'append_only'),
        ('import_origins', 'import_origins_10_no_forgery', 'append_only'),
        ('import_origins', 'import_origins_30_no_update', 'append_only'),
        ('import_origins', 'import_origins_90_append_only', 'append_only'),
        ('imports', 'imports_10_no_forgery', 'append_only'),
        ('imports', 'imports_30_no_update', 'append_only'),
        ('imports', 'imports_90_append_only', 'append_only'),
        ('message_parts', 'message_parts_10_refuse', 'append_only')) AS t (table_name, trigger_name, guards);
END;

-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
-- The view runs as its owner, so it filters by owner itself (the caller's
-- convo.owner_id, or every owner when the caller, the role SET ROLE set or
-- else the login role, as convo_private.caller says, is a member of
-- convo_reader), and walks the path in
-- plain SQL (as path_segments does): a caller may use only pg_catalog's
-- functions through it, not the private schema's. security_barrier: the
-- caller's own conditions run only on the rows the view returns, never
-- below its owner filter (a cheap function of the caller's in a WHERE
-- clause would otherwise be shown every owner's rows).
CREATE OR REPLACE VIEW convo.orphaned_applied_effects WITH (security_barrier = true) AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.external_ref,
       e.amount_minor,
       e.currency,
       e.settled_at,
       ARRAY(SELECT l.tool_call_id FROM convo.tool_effect_calls l
              WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
              ORDER BY l.decided_at) AS tool_call_ids
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state = 'applied'
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user::text)::name, 'convo_reader', 'USAGE')))
   AND NOT EXISTS (
        WITH RECURSIVE segments (branch_id, max_depth) AS (
            SELECT h.branch_id, h.depth
              FROM convo.messages h
             WHERE h.conversation_id = c.id AND h.id = c.head_message_id
            UNION ALL
            SELECT fork.branch_id, fork.depth
              FROM segments s
              JOIN convo.messages start ON start.conversation_id = c.id AND start.id = s.branch_id
              JOIN convo.messages fork ON fork.conversation_id = c.id AND fork.id = start.parent_id
        )
        SELECT 1
          FROM convo.tool_effect_calls l
          JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
          JOIN segments s ON s.branch_id = m.branch_id AND m.depth <= s.max_depth
         WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id);

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head (the caller''s owner, or all for convo_reader).';

-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream. Filtered
-- by owner like orphaned_applied_effects, and a security_barrier like it:
-- the caller's conditions run only on the rows it returns.
CREATE OR REPLACE VIEW convo.stale_generations WITH (security_barrier = true) AS
SELECT g.conversation_id,
       g.id AS generation_id,
       g.model,
       g.prompt_message_id,
       g.started_at
  FROM convo.generations g
  JOIN convo.conversations c ON c.id = g.conversation_id
 WHERE g.state = 'streaming'
   AND g.started_at < clock_timestamp() - convo.generation_stale_after()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user::text)::name, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';

-- stale_pending_effects: effects still pending or awaiting confirmation past
-- their deadline, with the key a sweeper re-sends (or looks up) under. A
-- pending effect is "unknown", never "not done": it is not failed
-- automatically, only settled on evidence. Filtered by owner like
-- orphaned_applied_effects: the caller's, or every owner for convo_reader;
-- a security_barrier like it, so the caller's conditions run only on the
-- rows it returns.
CREATE OR REPLACE VIEW convo.stale_pending_effects WITH (security_barrier = true) AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.state,
       e.idempotency_key,
       e.requested_at,
       e.deadline_at
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state IN ('pending', 'awaiting_confirmation')
   AND e.deadline_at < clock_timestamp()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user::text)::name, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_pending_effects IS
    'Effects pending or awaiting confirmation past their deadline, with the key to re-send or look up under.';

-- conversations_12_head_guard: a head moved outside pgconvo's code names a
-- message of its own conversation, in replica mode too (which skips the
-- foreign key); pgconvo's own head moves skip it in its WHEN.
CREATE OR REPLACE TRIGGER conversations_12_head_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id AND (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner'))
    EXECUTE FUNCTION convo_private.conversations_head_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_12_head_guard;

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
