-- 0029_restore_and_self_check_fixes: restore_problem checks parents and
-- depths in one join (it scanned the document's messages once for each
-- message); self_check's row-level-security check covers every table with a
-- conversation_id or owner_id column (the change log was missing from its
-- list); comments say what the code does.

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

-- conversations: an owner's conversations for a sidebar, latest activity
-- first (ties by id, descending), p_limit at a time (1 to 1,000), archived
-- ones only with p_archived. Keyset-paged: pass the last row's
-- last_activity_at and conversation_id as p_before and p_before_id for the
-- next page, so no conversation is skipped or repeated between pages even
-- when many share one time (an import); p_before alone means strictly
-- older. One range scan of conversations_sidebar_idx. A convo_app session
-- lists only the owner it set (CV011 for another); convo_reader any.
-- last_activity_at is the time of the conversation's last head move through
-- the API (a message that became the head, or a switch to another branch;
-- an import's: its latest message's original time, when it has one).
CREATE OR REPLACE FUNCTION convo.conversations(
    p_owner_id  text,
    p_limit     int DEFAULT 50,
    p_before    timestamptz DEFAULT NULL,
    p_archived  boolean DEFAULT false,
    p_before_id uuid DEFAULT NULL)
RETURNS TABLE (conversation_id uuid, title text, created_at timestamptz, last_activity_at timestamptz,
               head_message_id uuid, archived boolean)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_owner_id IS NULL OR NOT convo_private.sees_owner(p_owner_id) THEN
        RAISE EXCEPTION 'p_owner_id must be the owner this session acts for'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL')),
                  HINT = 'Name the owner with SET LOCAL convo.owner_id first.';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 1000, not %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF p_archived IS NULL THEN
        RAISE EXCEPTION 'p_archived must be true or false'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF p_before_id IS NOT NULL AND p_before IS NULL THEN
        RAISE EXCEPTION 'p_before_id goes with p_before: both are the last row of the previous page'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, p_before_id %s', p_owner_id, p_before_id);
    END IF;
    IF p_before IS NULL THEN
        RETURN QUERY
        SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
          FROM convo.conversations c
         WHERE c.owner_id = p_owner_id AND c.archived = p_archived
         ORDER BY c.last_activity_at DESC, c.id DESC
         LIMIT p_limit;
    ELSIF p_before_id IS NULL THEN
        RETURN QUERY
        SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
          FROM convo.conversations c
         WHERE c.owner_id = p_owner_id AND c.archived = p_archived AND c.last_activity_at < p_before
         ORDER BY c.last_activity_at DESC, c.id DESC
         LIMIT p_limit;
    ELSE
        RETURN QUERY
        SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
          FROM convo.conversations c
         WHERE c.owner_id = p_owner_id AND c.archived = p_archived
           AND (c.last_activity_at, c.id) < (p_before, p_before_id)
         ORDER BY c.last_activity_at DESC, c.id DESC
         LIMIT p_limit;
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.conversations(text, integer, timestamp with time zone, boolean, uuid) IS
    'An owner''s conversations, latest activity first, keyset-paged (p_before, p_before_id: the last row of the previous page): a chat sidebar.';

-- import_chatgpt: one conversation of a ChatGPT export (an element of
-- conversations.json, or a bare conversation object) as a new conversation
-- of p_owner_id, by the rules of docs/importing.md ("The rules"): the whole tree with
-- its original times, current_node as the head (head-log reason 'import'),
-- each source node kept verbatim in import_origins, tool calls as tool_use
-- and tool_result parts where they pair, no ledger rows. The id is derived
-- from the owner and the source id, so a repeat of the same import returns
-- it and writes nothing; the same source with other content is CV009.
-- Malformed input is CV011 naming the node, and nothing is written.
CREATE OR REPLACE FUNCTION convo.import_chatgpt(p_owner_id text, p_conversation jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_mapping jsonb := p_conversation -> 'mapping';
    v_current jsonb := p_conversation -> 'current_node';
    v_source  text;
    v_id      uuid;
    v_digest  text;
    v_existing uuid;
    v_where   text;
    v_bad     record;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);
    IF p_conversation IS NULL OR jsonb_typeof(p_conversation) <> 'object' THEN
        RAISE EXCEPTION 'p_conversation must be one ChatGPT conversation, a JSON object, not %',
                coalesce(jsonb_typeof(p_conversation), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each element of conversations.json on its own.';
    END IF;
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('chatgpt', 'ChatGPT conversation', p_owner_id,
                                    coalesce(convo_private.nonempty_text(p_conversation -> 'conversation_id'),
                                             convo_private.nonempty_text(p_conversation -> 'id')), p_conversation) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'chatgpt', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
    END IF;

    IF jsonb_typeof(v_mapping) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a ChatGPT conversation needs a "mapping" object, not %', coalesce(jsonb_typeof(v_mapping), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    -- The refusals of docs/importing.md, "Input and refusals", first node by
    -- key (bytewise) first.
    SELECT e.key, e.why INTO v_bad
      FROM (SELECT n.key, CASE
                   WHEN jsonb_typeof(n.node) <> 'object' THEN 'is not an object'
                   WHEN jsonb_typeof(n.node -> 'id') NOT IN ('null') AND n.node -> 'id' <> to_jsonb(n.key)
                       THEN 'has an id other than its key'
                   WHEN jsonb_typeof(n.node -> 'parent') NOT IN ('string', 'null')
                       THEN 'has a parent that is neither a string nor null'
                   WHEN jsonb_typeof(n.node -> 'parent') = 'string' AND NOT v_mapping ? (n.node ->> 'parent')
                       THEN 'names a parent that is not in the mapping (missing parent)'
                   WHEN jsonb_typeof(n.node -> 'children') NOT IN ('array', 'null')
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.node -> 'children') = 'array'
                                                                           THEN n.node -> 'children' END) c (child)
                                    WHERE jsonb_typeof(c.child) <> 'string')
                       THEN 'has children that are not an array of strings'
                   WHEN jsonb_typeof(n.node -> 'message') NOT IN ('object', 'null')
                       THEN 'has a message that is neither an object nor null'
                   WHEN jsonb_typeof(n.node -> 'message') IS DISTINCT FROM 'object' THEN NULL
                   WHEN (n.node -> 'message' -> 'author' ->> 'role') IS NULL
                        OR jsonb_typeof(n.node -> 'message' -> 'author' -> 'role') <> 'string'
                        OR n.node -> 'message' -> 'author' ->> 'role' NOT IN ('system', 'user', 'assistant', 'tool')
                       THEN 'has a missing or unknown author.role'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'author' -> 'name') NOT IN ('string', 'null')
                       THEN 'has an author.name that is neither a string nor null'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'content' -> 'content_type') IS DISTINCT FROM 'string'
                       THEN 'has no content, or a content_type that is not a string'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'create_time') NOT IN ('number', 'null')
                       THEN 'has a create_time that is neither a number nor null'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'create_time') = 'number'
                        AND convo_private.epoch_time(n.node -> 'message' -> 'create_time', NULL) IS NULL
                       THEN 'has a create_time outside years 1 to 9999'
                   END AS why
              FROM jsonb_each(v_mapping) AS n (key, node)) e
     WHERE e.why IS NOT NULL
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ChatGPT node % %', v_bad.key, v_bad.why
            USING ERRCODE = 'CV011', DETAIL = format('%s, node %s', v_where, v_bad.key);
    END IF;
    IF jsonb_typeof(v_current) IS DISTINCT FROM 'null' AND v_current IS NOT NULL
       AND (jsonb_typeof(v_current) <> 'string' OR NOT v_mapping ? (v_current #>> '{}')) THEN
        RAISE EXCEPTION 'current_node names no node of the mapping'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, current_node %s', v_where, left(v_current::text, convo_private.max_id_length()));
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'chatgpt', v_source, v_digest, v_mapping,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        convo_private.epoch_time(p_conversation -> 'create_time', NULL),
        jsonb_build_object('format', 'chatgpt', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'mapping', 'requested_head', coalesce(v_current, 'null')),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_chatgpt(text, jsonb) IS
    'Import one ChatGPT conversation (the whole tree, original times, current_node as the head); a repeat returns the same id.';

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

-- conversations_guard: of a conversation only the head, the title and the
-- archive state may change (each logged), its last activity only with its
-- head's moves through the API, and its metadata only by erasure (pgconvo's
-- erase_content): its id, owner and creation time are fixed, and a head once
-- set is never unset (the head always names a message). It runs for every UPDATE that changes a fixed
-- column or unsets the head, and for every UPDATE outside pgconvo's code
-- (not the owner role, or the owner role only because a session SET ROLE
-- or SET SESSION AUTHORIZATION to it: pgconvo's SECURITY DEFINER functions
-- run as the owner role with the caller's role setting and login).
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
    IF OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL THEN
        RAISE EXCEPTION 'the head of a conversation cannot be unset'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, head %s', OLD.id, OLD.head_message_id);
    END IF;
    IF (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
       AND NEW.last_activity_at IS DISTINCT FROM OLD.last_activity_at THEN
        RAISE EXCEPTION 'a conversation''s last_activity_at moves only with its head, through the API'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user);
    END IF;
    IF (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
       AND NEW.metadata::text IS DISTINCT FROM OLD.metadata::text THEN
        RAISE EXCEPTION 'convo.conversations is append-only: its metadata changes only by erasure'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user),
                  HINT = 'Content is removed only by convo.erase_conversation or convo.erase_owner.';
    END IF;
    RETURN NEW;
END;
$$;

-- export_of: the export document of one conversation (format pgconvo.export,
-- version 3; every key is described in docs/erasure.md and on
-- convo.export_conversation), without an owner check: export_conversation
-- checks the reader, import_conversation compares an import with what it
-- stored. Every row is the table's own row as jsonb, without the
-- conversation id it repeats, in a fixed order, and times print in UTC, so
-- the same rows give the same text in any session and any database.
-- PL/pgSQL, as every function over the tables (a distributed engine runs
-- its statements where the rows are). The
-- tools are the versions the ledger's calls and effects were checked
-- against; the imports are the conversation's record of imports.
CREATE OR REPLACE FUNCTION convo_private.export_of(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'format', 'pgconvo.export',
        'version', 3,
        'conversation', to_jsonb(c),
        'messages', coalesce((SELECT jsonb_agg(to_jsonb(m) - 'conversation_id' ORDER BY m.depth, m.parent_id, m.sibling_index)
                                FROM convo.messages m WHERE m.conversation_id = c.id), '[]'),
        'head_log', coalesce((SELECT jsonb_agg(to_jsonb(l) - 'conversation_id' ORDER BY l.seq)
                                FROM convo.conversation_head_log l WHERE l.conversation_id = c.id), '[]'),
        'changes', coalesce((SELECT jsonb_agg(to_jsonb(x) - 'conversation_id' ORDER BY x.seq)
                               FROM convo.conversation_changes x WHERE x.conversation_id = c.id), '[]'),
        'generations', coalesce((SELECT jsonb_agg(to_jsonb(g) - 'conversation_id' ORDER BY g.started_at, g.id)
                                   FROM convo.generations g WHERE g.conversation_id = c.id), '[]'),
        'tools', coalesce((SELECT jsonb_agg(to_jsonb(t) - 'registered_at' - 'registered_by' ORDER BY t.name, t.version)
                             FROM convo.tools t
                            WHERE (t.name, t.version) IN (SELECT e.tool_name, e.tool_version FROM convo.tool_effects e
                                                           WHERE e.conversation_id = c.id
                                                          UNION
                                                          SELECT k.tool_name, k.tool_version FROM convo.tool_effect_calls k
                                                           WHERE k.conversation_id = c.id)), '[]'),
        'tool_calls', coalesce((SELECT jsonb_agg(to_jsonb(k) - 'conversation_id' ORDER BY k.decided_at, k.tool_call_id)
                                  FROM convo.tool_effect_calls k WHERE k.conversation_id = c.id), '[]'),
        'effects', coalesce((SELECT jsonb_agg(to_jsonb(e) - 'conversation_id' ORDER BY e.requested_at, e.id)
                               FROM convo.tool_effects e WHERE e.conversation_id = c.id), '[]'),
        'effect_events', coalesce((SELECT jsonb_agg(to_jsonb(v) - 'conversation_id' ORDER BY v.seq)
                                     FROM convo.tool_effect_events v WHERE v.conversation_id = c.id), '[]'),
        'erasures', coalesce((SELECT jsonb_agg(to_jsonb(r) - 'conversation_id'
                                               || jsonb_build_object('places', coalesce(
                                                      (SELECT jsonb_agg(jsonb_build_object('place', p.place, 'rows_redacted', p.rows_redacted)
                                                                        ORDER BY p.place)
                                                         FROM convo.erasure_places p
                                                        WHERE p.owner_id = r.owner_id AND p.erasure_id = r.id), '[]'))
                                               ORDER BY r.erased_at, r.id)
                                FROM convo.erasures r WHERE r.conversation_id = c.id), '[]'),
        -- Import origins: the source node of each message that came from
        -- another product (import_chatgpt, import_openwebui, import_librechat),
        -- by message.
        'origins', coalesce((SELECT jsonb_agg(to_jsonb(o) - 'conversation_id' ORDER BY o.message_id)
                               FROM convo.import_origins o WHERE o.conversation_id = c.id), '[]'),
        'imports', coalesce((SELECT jsonb_agg(to_jsonb(i) - 'conversation_id' ORDER BY i.imported_at, i.id)
                               FROM convo.imports i WHERE i.conversation_id = c.id), '[]'))
      FROM convo.conversations c
     WHERE c.id = p_conversation_id);
END;
$$;

-- import_tree: the shared second half of import_chatgpt, import_openwebui
-- and import_librechat, once the source is checked: the tree (docs/importing.md: "The tree",
-- "Times", "Sibling order and branch reasons", "The head", "Nothing is
-- lost") written as one new conversation. Imported messages are the nodes
-- whose message is an object; each hangs under its nearest imported
-- ancestor (import_walk) with its original time; siblings are inserted in
-- the order (time, position in the source parent's children, key bytewise),
-- which is their sibling_index, with branch reasons by role; the head is
-- the nearest imported node at or above p_current, else the latest leaf;
-- each message's source node is kept in import_origins. Caps are checked
-- first (CV010 naming the node); no ledger row, receipt or generation is
-- written. The export's title becomes the conversation's (cut to
-- max_title_length; the export's own stays in the metadata), and its last
-- activity the latest message's time (a tree without messages keeps its
-- creation time). The import is recorded in convo.imports (owner, format, source
-- key, keyed digest, who, when), and every row it writes, the head-log row
-- 'import' included, names that record (import_id). Every step is a pass
-- or a hash join over the nodes: linear.
CREATE OR REPLACE FUNCTION convo_private.import_tree(
    p_conversation_id uuid,
    p_owner_id        text,
    p_source          text,
    p_source_key      text,
    p_digest          text,
    p_mapping         jsonb,
    p_current         text,
    p_conv_time       timestamptz,
    p_metadata        jsonb,
    p_where           text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_import     uuid := gen_random_uuid();
    v_existing   uuid;
    v_keys       text[];
    v_parent     int[];
    v_imported   boolean[];
    v_time       timestamptz[];
    v_dropped    jsonb;
    v_imp        int[];
    v_depth      int[];
    v_at         timestamptz[];
    -- the messages, in insertion order
    m_idx        int[];
    m_imp        int[];
    m_key        text[];
    m_id         uuid[];
    m_parent     uuid[];
    m_role       text[];
    m_reason     text[];
    m_parts      jsonb[];
    m_at         timestamptz[];
    m_node       jsonb[];
    v_mismatches bigint;
    v_i          int;
    v_head_idx   int;
    v_head       uuid;
    v_fallback   text;
    v_bad        record;
    v_metadata   jsonb;
    v_title      text;         -- the export's title, cut to max_title_length
    v_created    timestamptz;
BEGIN
    -- The nodes as arrays in key order, each parent as an index (0: none).
    WITH n AS MATERIALIZED (SELECT * FROM convo_private.import_nodes(p_source, p_mapping))
    SELECT coalesce(array_agg(n.key ORDER BY n.idx), '{}'),
           coalesce(array_agg(coalesce(p.idx, 0) ORDER BY n.idx), '{}'),
           coalesce(array_agg(jsonb_typeof(n.message) IS NOT DISTINCT FROM 'object' ORDER BY n.idx), '{}'),
           coalesce(array_agg(n.at ORDER BY n.idx), '{}'),
           coalesce(jsonb_object_agg(n.key, n.node) FILTER (WHERE jsonb_typeof(n.message) IS DISTINCT FROM 'object'), '{}')
      INTO v_keys, v_parent, v_imported, v_time, v_dropped
      FROM n LEFT JOIN n p ON p.key = n.parent_key;

    SELECT * INTO v_imp, v_depth, v_at
      FROM convo_private.import_walk(v_keys, v_parent, v_imported, v_time, coalesce(p_conv_time, v_now), p_where);

    -- The messages: role and parts (given the imported parent), sibling
    -- order and branch reason; and the children lists' disagreements.
    WITH n AS MATERIALIZED (
        SELECT n.*, x.imp, x.depth, x.at AS created_at
          FROM convo_private.import_nodes(p_source, p_mapping) n
          JOIN unnest(v_imp, v_depth, v_at) WITH ORDINALITY AS x (imp, depth, at, idx) ON x.idx = n.idx
    ), listed AS MATERIALIZED (
        SELECT n.key AS parent_key, c.child, min(c.ord) AS ord
          FROM n, jsonb_array_elements_text(CASE WHEN jsonb_typeof(n.children) = 'array' THEN n.children ELSE '[]' END)
                  WITH ORDINALITY AS c (child, ord)
         GROUP BY n.key, c.child
    ), m AS MATERIALIZED (
        SELECT n.idx, n.imp, n.key, n.node, n.depth, n.created_at, l.ord, p.key AS imp_parent_key,
               CASE p_source WHEN 'chatgpt' THEN convo_private.chatgpt_message(n.key, n.message, p.key, p.message)
                             WHEN 'librechat' THEN convo_private.librechat_message(n.message)
                             ELSE convo_private.openwebui_message(n.message) END AS rp
          FROM n
          LEFT JOIN n p ON p.idx = n.imp
          LEFT JOIN listed l ON l.parent_key = n.parent_key AND l.child = n.key
         WHERE jsonb_typeof(n.message) = 'object'
    ), o AS (
        SELECT m.*, m.rp ->> 'role' AS role, row_number() OVER s AS sib, first_value(m.rp ->> 'role') OVER s AS first_role
          FROM m
        WINDOW s AS (PARTITION BY m.imp ORDER BY m.created_at, m.ord NULLS LAST, m.key COLLATE "C")
    )
    SELECT array_agg(o.idx ORDER BY o.depth, o.imp, o.sib), array_agg(o.imp ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.key ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.imp_parent_key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.role ORDER BY o.depth, o.imp, o.sib),
           array_agg(CASE WHEN o.sib = 1 THEN NULL
                          WHEN o.role = 'user' AND o.first_role = 'user' THEN 'user_edit'
                          WHEN o.role = 'assistant' AND o.first_role = 'assistant' THEN 'regenerate'
                          ELSE 'branch' END ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.rp -> 'parts' ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.created_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.node ORDER BY o.depth, o.imp, o.sib),
           -- (A LibreChat message whose children were not read, every one of
           -- a flat export, lists nothing to disagree with.)
           (SELECT count(*)
              FROM (SELECT c.parent_key, c.key FROM n c JOIN n p ON p.key = c.parent_key
                     WHERE p_source <> 'librechat' OR p.children IS NOT NULL) a
              FULL JOIN listed b ON b.parent_key = a.parent_key AND b.child = a.key
             WHERE a.key IS NULL OR b.child IS NULL)
      INTO m_idx, m_imp, m_key, m_id, m_parent, m_role, m_reason, m_parts, m_at, m_node, v_mismatches
      FROM o;

    -- Caps, before anything is written: CV010 naming the first node over one.
    SELECT x.key, x.why INTO v_bad
      FROM (SELECT x.key, CASE
                   WHEN octet_length(x.parts::text) > convo.max_message_bytes()
                       THEN format('a message of %s bytes (max_message_bytes %s)', octet_length(x.parts::text), convo.max_message_bytes())
                   WHEN octet_length(x.node::text) > convo.max_message_bytes()
                       THEN format('a source node of %s bytes (max_message_bytes %s)', octet_length(x.node::text), convo.max_message_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE octet_length(p.part::text) > convo.max_part_bytes())
                       THEN format('a part over max_part_bytes %s', convo.max_part_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE p.part ->> 'type' = 'tool_use'
                                   AND octet_length((p.part -> 'input')::text) > convo.max_tool_input_bytes())
                       THEN format('a tool input over max_tool_input_bytes %s', convo.max_tool_input_bytes())
                   WHEN length(x.key) > convo_private.max_id_length() AND x.parts -> 0 ->> 'type' = 'tool_use'
                       THEN format('a tool call id (the node key) of %s characters (at most %s)', length(x.key), convo_private.max_id_length())
                   END AS why
              FROM unnest(m_key, m_parts, m_node) AS x (key, parts, node)) x
     WHERE x.why IS NOT NULL
     ORDER BY x.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the import is over a size cap at node %', v_bad.key
            USING ERRCODE = 'CV010', DETAIL = format('%s, node %s: %s', p_where, v_bad.key, v_bad.why);
    END IF;

    -- The head: the nearest imported node at or above p_current, else the latest leaf.
    IF p_current IS NOT NULL THEN
        v_i := array_position(v_keys, p_current);
        v_head_idx := CASE WHEN v_imported[v_i] THEN v_i ELSE nullif(v_imp[v_i], 0) END;
    END IF;
    IF v_head_idx IS NOT NULL THEN
        v_head := md5(p_conversation_id::text || ':' || v_keys[v_head_idx])::uuid;
    ELSE
        SELECT x.id INTO v_head
          FROM unnest(m_id, m_idx, m_at, m_key) AS x (id, idx, at, key)
         WHERE NOT EXISTS (SELECT 1 FROM unnest(m_imp) AS c (imp) WHERE c.imp = x.idx)
         ORDER BY x.at DESC, x.key COLLATE "C" DESC
         LIMIT 1;
        v_fallback := CASE WHEN v_head IS NOT NULL THEN 'latest_leaf' END;
    END IF;

    v_metadata := jsonb_build_object('import', p_metadata || jsonb_build_object(
        'dropped_nodes', v_dropped, 'children_mismatches', v_mismatches, 'head_fallback', v_fallback));
    IF octet_length(v_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'the import''s conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: metadata of %s bytes', p_where, octet_length(v_metadata::text));
    END IF;

    v_title := left(convo_private.nonempty_text(p_metadata -> 'title'), convo_private.max_title_length());
    v_created := coalesce(p_conv_time, (SELECT min(a) FROM unnest(m_at) AS a), v_now);
    INSERT INTO convo.conversations (id, owner_id, metadata, created_at, title, last_activity_at)
    VALUES (p_conversation_id, p_owner_id, v_metadata, v_created, v_title, v_created)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- The same import committed by another session meanwhile (a repeat,
        -- or CV009), or an earlier import of this source that erasure has
        -- left without its source key.
        v_existing := convo_private.import_repeat(p_owner_id, p_source, p_source_key, p_digest, p_where);
        IF v_existing IS NOT NULL THEN
            RETURN v_existing;
        END IF;
        RAISE EXCEPTION 'conversation % was imported before from this source and erased', p_conversation_id
            USING ERRCODE = 'CV009', DETAIL = p_where,
                  HINT = 'An erased import is not imported again under its id; import it under another owner.';
    END IF;
    INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
    VALUES (p_conversation_id, v_import, p_owner_id, p_source, p_source_key, p_digest);
    -- The export's title is the conversation's, logged as the import's.
    IF v_title IS NOT NULL THEN
        PERFORM convo_private.log_change(p_conversation_id, 'title', NULL, v_title, convo_private.caller(), v_import);
    END IF;

    -- Origins (their foreign key is deferred), then the messages through
    -- write_messages, parents before children, siblings in order, with
    -- their original times and the import's record (so no ledger row),
    -- and the head's one move, 'import'.
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT p_conversation_id, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    PERFORM convo_private.write_messages(p_conversation_id, NULL, m_id, m_parent, m_role, m_parts, m_reason, m_at,
                                         v_import, v_head, 'import', NULL);
    RETURN p_conversation_id;
END;
$$;

-- log_head_move: what follows a head's move, in the transaction that made
-- it: one conversation_head_log row (seq numbered per conversation, under
-- the conversation's lock), the live path moved with it, and the convo_head
-- notification (unless convo.notify is off; the payload holds ids, seq and
-- reason only, never content, the owner or the mover: LISTEN is not
-- owner-scoped). write_messages calls it for pgconvo's own moves, with the
-- reason, mover and import they were given; log_direct_head_move (trigger
-- conversations_20_log_direct) for an UPDATE outside the API (direct_update, by the caller). An append (the new
-- head a child of the old one) extends the live path by one UPDATE or
-- INSERT; any other move goes to move_live_path.
CREATE OR REPLACE FUNCTION convo_private.log_head_move(
    p_conversation_id uuid,
    p_head            uuid,
    p_old_head        uuid,
    p_reason          text,
    p_moved_by        text,
    p_import_id       uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq    bigint;
    v_depth  int;
    v_parent uuid;
    v_sib    int;
BEGIN
    INSERT INTO convo.conversation_head_log
        (conversation_id, seq, head_message_id, previous_head_id, moved_by, reason, import_id)
    SELECT p_conversation_id, coalesce(max(l.seq), 0) + 1, p_head, p_old_head, p_moved_by, p_reason, p_import_id
      FROM convo.conversation_head_log l
     WHERE l.conversation_id = p_conversation_id
    RETURNING seq INTO v_seq;

    -- An append that continues the head's branch (the new head its first
    -- child) grows the last segment, in one statement; anything else reads
    -- the new head and moves the path.
    UPDATE convo.live_path l SET max_depth = m.depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head AND m.parent_id = p_old_head AND m.sibling_index = 1
       AND l.conversation_id = p_conversation_id AND l.branch_id = m.branch_id AND l.max_depth = m.depth - 1;
    IF NOT FOUND THEN
        SELECT m.depth, m.parent_id, m.sibling_index INTO v_depth, v_parent, v_sib
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = p_head;
        IF p_old_head IS NOT NULL AND v_parent = p_old_head AND v_sib > 1 THEN
            -- A later child starts a branch of its own: one new segment.
            INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth)
            VALUES (p_conversation_id, v_depth, p_head, v_depth);
        ELSE
            PERFORM convo_private.move_live_path(p_conversation_id, p_head);
        END IF;
    END IF;

    IF current_setting('convo.notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('convo_head', json_build_object(
            'conversation_id', p_conversation_id, 'seq', v_seq, 'head_message_id', p_head,
            'previous_head_id', p_old_head, 'reason', p_reason)::text);
    END IF;
END;
$$;

-- move_live_path: keeps convo.live_path, the derived index of the live
-- path, equal to the segments of the path from the root to p_head_id: one
-- row per branch the path runs through (a branch is a run of first
-- children), from the depth where it starts to the deepest of it on the
-- path. It walks up from the head one segment at a time (three key lookups
-- each: the live path, the branch's start, its parent) until it meets a branch already on the live path (the fork), cuts
-- that one at the fork and drops the rows below it: a move costs the
-- segments that change, never the conversation. path reads the messages
-- of each segment as one index range scan.
CREATE OR REPLACE FUNCTION convo_private.move_live_path(p_conversation_id uuid, p_head_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branch   uuid;
    v_depth    int;
    v_start    int;
    v_parent   uuid;
    v_shared   int;
    v_branches uuid[] := '{}';
    v_mins     int[] := '{}';
    v_maxs     int[] := '{}';
BEGIN
    SELECT m.branch_id, m.depth INTO v_branch, v_depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head_id;
    WHILE v_branch IS NOT NULL LOOP
        SELECT l.min_depth INTO v_shared
          FROM convo.live_path l
         WHERE l.conversation_id = p_conversation_id AND l.branch_id = v_branch;
        EXIT WHEN FOUND;
        -- A branch's id is its first message's.
        SELECT m.depth, m.parent_id INTO v_start, v_parent
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_branch;
        v_branches := v_branches || v_branch;
        v_mins := v_mins || v_start;
        v_maxs := v_maxs || v_depth;
        v_branch := NULL;
        IF v_parent IS NOT NULL THEN
            SELECT m.branch_id, m.depth INTO v_branch, v_depth
              FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_parent;
        END IF;
    END LOOP;
    IF v_shared IS NOT NULL THEN
        DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id AND l.min_depth > v_shared;
        UPDATE convo.live_path l SET max_depth = v_depth
         WHERE l.conversation_id = p_conversation_id AND l.min_depth = v_shared;
    ELSE
        DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    END IF;
    INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth)
    SELECT p_conversation_id, s.min_depth, s.branch_id, s.max_depth
      FROM unnest(v_mins, v_branches, v_maxs) AS s (min_depth, branch_id, max_depth);
END;
$$;

-- restore_problem: the first reason, naming the key and the row, why an
-- export document is not a history this database could have written, or
-- NULL. import_conversation refuses the document with it (CV011) before
-- writing anything; what needs the stored tree (the ledger's decisions,
-- links and amounts) is ledger_problems', after. In one pass each:
--   references: every id the document names is in it, and the chains hold
--   (parents, depths, the head log ending at the head, effects' events from
--   'requested' to their state);
--   numbers: a head-log or event seq appears once (import_conversation
--   renumbers them, keeping their order);
--   reasons: the head log's are the API's ('direct_update' is never
--   restored; 'create' and 'import' only begin a log);
--   keys: an effect's idempotency key is its scope key, the re-run key of
--   its confirmation, or (sent before digests were keyed) a plain digest of
--   its scope;
--   times, in order: nothing after p_now or before the conversation, a head
--   move not before its message, events of an effect in order and not
--   before it, an effect not before its call, a call not before its
--   message, a generation not before its prompt nor ending before it began;
--   a message not before its parent unless it came from another product
--   (an origin), whose times are the source's;
--   erasures: one is restored only where every copy of the content from
--   before it is redacted, each place is one erasure writes, and no count
--   is more than the rows there;
--   imports: the document's records are of this owner, of a known format,
--   and not after p_now;
--   changes: the change log (title, archive state) is a chain from none to
--   what the conversation holds, in time order, its titles redacted by an
--   erasure after them.
CREATE OR REPLACE FUNCTION convo_private.restore_problem(p_owner_id text, p_export jsonb, p_now timestamptz)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_conv    jsonb := p_export -> 'conversation';
    v_created timestamptz := (p_export -> 'conversation' ->> 'created_at')::timestamptz;
    v_problem text;
BEGIN
    WITH m AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages')),
         l AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.conversation_head_log, p_export -> 'head_log')),
         g AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.generations, p_export -> 'generations')),
         k AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effect_calls, p_export -> 'tool_calls')),
         e AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effects, p_export -> 'effects')),
         v AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events')),
         t AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tools, p_export -> 'tools')),
         o AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins')),
         r AS (SELECT x.*, j.elem -> 'places' AS places
                 FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
                      LATERAL jsonb_populate_record(NULL::convo.erasures, j.elem) x),
         i AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.imports, p_export -> 'imports')),
         ch AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.conversation_changes, p_export -> 'changes')),
         -- Messages that came from another product keep the source's times.
         mo AS (SELECT m.*, EXISTS (SELECT 1 FROM o WHERE o.message_id = m.id) AS imported FROM m),
         -- How many rows of each place the document holds, for erasure counts.
         counts (place, n) AS (VALUES
             ('messages', (SELECT count(*) FROM m)),
             ('message_parts', (SELECT coalesce(sum(jsonb_array_length(m.parts)), 0) FROM m)),
             ('conversations', 1),
             ('generations', (SELECT count(*) FROM g)),
             ('tool_effects', (SELECT count(*) FROM e)),
             ('tool_effect_events', (SELECT count(*) FROM v)),
             ('import_origins', (SELECT count(*) FROM o)),
             ('imports', (SELECT count(*) FROM i)),
             ('conversation_changes', (SELECT count(*) FROM ch)))
    SELECT p INTO v_problem FROM (
        -- References.
        (SELECT format('messages: message %s appears twice', m.id) FROM m GROUP BY m.id HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        -- A parent missing, else a depth that is not its parent's plus one:
        -- one join of every message with its parent (ordered, so it is a
        -- hash join and not a scan of the messages for each message).
        (SELECT CASE WHEN x.orphan
                     THEN format('messages: message %s has parent %s, which is not in the export', x.id, x.parent_id)
                     ELSE format('messages: message %s has depth %s under parent %s of depth %s', x.id, x.depth, x.parent_id, x.pdepth) END
           FROM (SELECT c.id, c.parent_id, c.depth, p.depth AS pdepth, c.parent_id IS NOT NULL AND p.id IS NULL AS orphan
                   FROM m c LEFT JOIN m p ON p.id = c.parent_id
                  WHERE (c.parent_id IS NOT NULL AND p.id IS NULL)
                     OR c.depth IS DISTINCT FROM CASE WHEN c.parent_id IS NULL THEN 0 ELSE p.depth + 1 END) x
          ORDER BY x.orphan DESC
          LIMIT 1)
        UNION ALL
        (SELECT format('conversation: head %s is not in the tree', v_conv ->> 'head_message_id')
          WHERE v_conv ->> 'head_message_id' IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM m WHERE m.id::text = v_conv ->> 'head_message_id'))
        UNION ALL
        (SELECT format('head_log: row seq %s names message %s, which is not in the export', l.seq, coalesce(l.head_message_id, l.previous_head_id))
           FROM l WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = l.head_message_id)
                     OR (l.previous_head_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = l.previous_head_id)) LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s appears twice', l.seq) FROM l GROUP BY l.seq HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s starts at %s, not where the row before ended (%s)', x.seq,
                       coalesce(x.previous_head_id::text, 'none'), coalesce(x.before::text, 'none'))
           FROM (SELECT l.seq, l.previous_head_id, lag(l.head_message_id) OVER (ORDER BY l.seq) AS before FROM l) x
          WHERE x.previous_head_id IS DISTINCT FROM x.before LIMIT 1)
        UNION ALL
        (SELECT format('head_log: the log ends at %s, the head is %s', coalesce(x.head_message_id::text, 'none'),
                       coalesce(v_conv ->> 'head_message_id', 'none'))
           FROM (SELECT (SELECT l.head_message_id FROM l ORDER BY l.seq DESC LIMIT 1) AS head_message_id) x
          WHERE x.head_message_id::text IS DISTINCT FROM v_conv ->> 'head_message_id')
        UNION ALL
        (SELECT format('generations: generation %s names message %s, which is not in the export', g.id,
                       coalesce(g.prompt_message_id, g.head_at_begin, g.message_id))
           FROM g WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.prompt_message_id)
                     OR (g.head_at_begin IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.head_at_begin))
                     OR (g.message_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.message_id)) LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s names message %s, which is not in the export', k.tool_call_id, coalesce(k.message_id, k.fork_point_id))
           FROM k WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = k.message_id)
                     OR (k.fork_point_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = k.fork_point_id)) LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s names effect %s, which is not in the export', k.tool_call_id, k.effect_id)
           FROM k WHERE k.effect_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM e WHERE e.id = k.effect_id) LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s names tool %s version %s, which is not in the export', k.tool_call_id, k.tool_name, k.tool_version)
           FROM k WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.name = k.tool_name AND t.version = k.tool_version) LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s repeats effect %s, which is not in the export', e.id, e.repeats_effect_id)
           FROM e WHERE e.repeats_effect_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM e r WHERE r.id = e.repeats_effect_id) LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s names tool %s version %s, which is not in the export', e.id, e.tool_name, e.tool_version)
           FROM e WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.name = e.tool_name AND t.version = e.tool_version) LIMIT 1)
        UNION ALL
        (SELECT format('erasures: erasure %s names owner %s', r.id, r.owner_id) FROM r WHERE r.owner_id IS DISTINCT FROM p_owner_id LIMIT 1)
        UNION ALL
        (SELECT format('origins: the origin of message %s names no message of the export', o.message_id)
           FROM o WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = o.message_id) LIMIT 1)
        UNION ALL
        (SELECT format('origins: message %s has two origins', o.message_id) FROM o GROUP BY o.message_id HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s names effect %s, which is not in the export', v.seq, v.effect_id)
           FROM v WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.id = v.effect_id) LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s appears twice', v.seq) FROM v GROUP BY v.seq HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s of effect %s goes from %s, not from %s', x.seq, x.effect_id, x.from_state, x.before)
           FROM (SELECT v.seq, v.effect_id, v.from_state,
                        coalesce(lag(v.to_state) OVER (PARTITION BY v.effect_id ORDER BY v.seq), 'requested') AS before FROM v) x
          WHERE x.from_state IS DISTINCT FROM x.before LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s is %s, its last event says %s', e.id, e.state, coalesce(x.to_state, 'nothing'))
           FROM e LEFT JOIN (SELECT DISTINCT ON (v.effect_id) v.effect_id, v.to_state FROM v ORDER BY v.effect_id, v.seq DESC) x
             ON x.effect_id = e.id
          WHERE x.to_state IS DISTINCT FROM e.state LIMIT 1)
        UNION ALL
        -- Reasons.
        (SELECT format('head_log: row seq %s has reason %s, which only the database writes for a change outside the API', l.seq, l.reason)
           FROM l WHERE l.reason = 'direct_update' ORDER BY l.seq LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s has reason %s, which only begins a head log', x.seq, x.reason)
           FROM (SELECT l.seq, l.reason, row_number() OVER (ORDER BY l.seq) AS n FROM l) x
          WHERE x.reason IN ('create', 'import') AND x.n > 1 ORDER BY x.seq LIMIT 1)
        UNION ALL
        -- Keys.
        (SELECT format('effects: effect %s has idempotency key %s, which is neither its scope key nor its re-run''s key', e.id, e.idempotency_key)
           FROM e
          WHERE e.idempotency_key IS DISTINCT FROM CASE WHEN e.confirmed_by IS NULL THEN e.scope_key
                                                        ELSE 'rerun:' || e.id || ':of:' || e.repeats_effect_id END
            -- A key sent before digests were keyed keeps its plain form.
            AND NOT (e.confirmed_by IS NULL AND e.state <> 'awaiting_confirmation'
                     AND e.idempotency_key ~ ('^' || split_part(e.scope_key, ':', 1) || ':[0-9a-f]{64}$'))
          LIMIT 1)
        UNION ALL
        -- Times.
        (SELECT format('conversation: created_at %s is after the import', v_created) WHERE v_created > p_now)
        UNION ALL
        (SELECT format('messages: message %s created at %s, %s', m.id, m.created_at,
                       CASE WHEN m.created_at > p_now THEN 'after the import' ELSE 'before the conversation' END)
           FROM mo m WHERE NOT m.imported AND (m.created_at > p_now OR m.created_at < v_created) LIMIT 1)
        UNION ALL
        (SELECT format('messages: message %s created at %s, before its parent %s (%s)', c.id, c.created_at, p.id, p.created_at)
           FROM mo c JOIN mo p ON p.id = c.parent_id
          WHERE NOT c.imported AND NOT p.imported AND c.created_at < p.created_at LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s moved at %s, %s', l.seq, l.moved_at,
                       CASE WHEN l.moved_at > p_now THEN 'after the import' ELSE 'before the conversation' END)
           FROM l WHERE l.moved_at > p_now OR l.moved_at < v_created ORDER BY l.seq LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s moved at %s, before the row before it', x.seq, x.moved_at)
           FROM (SELECT l.seq, l.moved_at, lag(l.moved_at) OVER (ORDER BY l.seq) AS before FROM l) x
          WHERE x.moved_at < x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s moved at %s to message %s, created later (%s)', l.seq, l.moved_at, m.id, m.created_at)
           FROM l JOIN mo m ON m.id = l.head_message_id WHERE NOT m.imported AND l.moved_at < m.created_at ORDER BY l.seq LIMIT 1)
        UNION ALL
        (SELECT format('generations: generation %s %s', g.id, CASE
                    WHEN g.started_at > p_now OR g.finished_at > p_now THEN 'is dated after the import'
                    WHEN g.finished_at < g.started_at THEN 'finished before it started'
                    ELSE 'started before its prompt message was created' END)
           FROM g JOIN mo m ON m.id = g.prompt_message_id
          WHERE g.started_at > p_now OR g.finished_at > p_now OR g.finished_at < g.started_at
             OR (NOT m.imported AND g.started_at < m.created_at) LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s decided at %s, %s', k.tool_call_id, k.decided_at,
                       CASE WHEN k.decided_at > p_now THEN 'after the import' ELSE 'before its message was created' END)
           FROM k JOIN mo m ON m.id = k.message_id
          WHERE k.decided_at > p_now OR (NOT m.imported AND k.decided_at < m.created_at) LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s requested at %s, %s', e.id, e.requested_at,
                       CASE WHEN e.requested_at > p_now THEN 'after the import' ELSE 'before its call''s message was created' END)
           FROM e JOIN k ON k.effect_id = e.id AND k.decision IN ('execute', 'confirm', 'rejected')
           JOIN mo m ON m.id = k.message_id
          WHERE e.requested_at > p_now OR (NOT m.imported AND e.requested_at < m.created_at) LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s of effect %s at %s, %s', x.seq, x.effect_id, x.at, CASE
                    WHEN x.at > p_now THEN 'after the import'
                    WHEN x.at < x.requested_at THEN 'before the effect was requested'
                    ELSE 'before the event before it' END)
           FROM (SELECT v.seq, v.effect_id, v.at, e.requested_at, lag(v.at) OVER (PARTITION BY v.effect_id ORDER BY v.seq) AS before
                   FROM v JOIN e ON e.id = v.effect_id) x
          WHERE x.at > p_now OR x.at < x.requested_at OR x.at < x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        -- The change log: each row once, each change from what the row
        -- before left (a title from none, an archive state from false), the
        -- last one what the conversation holds, in time order.
        (SELECT format('changes: row seq %s appears twice', ch.seq) FROM ch GROUP BY ch.seq HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changes %s, which is not title or archived', ch.seq, coalesce(ch.field, 'nothing'))
           FROM ch WHERE ch.field IS NULL OR ch.field NOT IN ('title', 'archived') LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changes %s from %s, which is not what it was (%s)', x.seq, x.field,
                       coalesce(x.old_value, 'none'), coalesce(x.before, 'none'))
           FROM (SELECT ch.seq, ch.field, ch.old_value,
                        coalesce(lag(ch.new_value, 1, CASE ch.field WHEN 'archived' THEN 'false' END)
                                     OVER (PARTITION BY ch.field ORDER BY ch.seq),
                                 CASE WHEN ch.field = 'archived' THEN 'false' END) AS before
                   FROM ch WHERE ch.field IN ('title', 'archived')) x
          WHERE x.old_value IS DISTINCT FROM x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        (SELECT format('changes: the log leaves the %s %s, the conversation holds %s', f.field, coalesce(f.logged, 'none'),
                       coalesce(f.held, 'none'))
           FROM (SELECT 'title' AS field, v_conv ->> 'title' AS held,
                        (SELECT ch.new_value FROM ch WHERE ch.field = 'title' ORDER BY ch.seq DESC LIMIT 1) AS logged
                 UNION ALL
                 SELECT 'archived', v_conv ->> 'archived',
                        coalesce((SELECT ch.new_value FROM ch WHERE ch.field = 'archived' ORDER BY ch.seq DESC LIMIT 1), 'false')) f
          WHERE f.held IS DISTINCT FROM f.logged LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changed at %s, %s', ch.seq, ch.changed_at,
                       CASE WHEN ch.changed_at > p_now THEN 'after the import' ELSE 'before the conversation' END)
           FROM ch WHERE ch.changed_at > p_now OR ch.changed_at < v_created ORDER BY ch.seq LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changed at %s, before the row before it', x.seq, x.changed_at)
           FROM (SELECT ch.seq, ch.changed_at, lag(ch.changed_at) OVER (ORDER BY ch.seq) AS before FROM ch) x
          WHERE x.changed_at < x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        (SELECT format('conversation: last activity at %s, after the import', v_conv ->> 'last_activity_at')
          WHERE (v_conv ->> 'last_activity_at')::timestamptz > p_now)
        UNION ALL
        -- Erasures.
        (SELECT format('erasures: erasure %s dated %s, %s', r.id, r.erased_at,
                       CASE WHEN r.erased_at > p_now THEN 'after the import' ELSE 'before the conversation' END)
           FROM r WHERE r.erased_at > p_now OR r.erased_at < v_created LIMIT 1)
        UNION ALL
        (SELECT format('erasures: erasure %s, but %s', r.id, x.what)
           FROM r CROSS JOIN LATERAL (
                SELECT format('message %s, created before it, is not redacted', m.id) AS what
                  FROM m WHERE m.created_at <= r.erased_at
                   AND m.parts::text IS DISTINCT FROM (convo_private.redact_row('messages', to_jsonb(m)) -> 'parts')::text
                UNION ALL
                SELECT 'the conversation''s metadata is not redacted' WHERE v_conv -> 'metadata' IS DISTINCT FROM '{}'::jsonb
                UNION ALL
                SELECT format('change seq %s, before it, holds a title', ch.seq)
                  FROM ch WHERE ch.field = 'title' AND ch.changed_at <= r.erased_at
                   AND (ch.old_value IS NOT NULL OR ch.new_value IS NOT NULL)
                UNION ALL
                SELECT 'the conversation''s title, set before it, is not redacted'
                 WHERE v_conv ->> 'title' IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM ch WHERE ch.field = 'title' AND ch.changed_at > r.erased_at)
                UNION ALL
                SELECT format('generation %s, started before it, is not redacted', g.id)
                  FROM g WHERE g.started_at <= r.erased_at
                   AND to_jsonb(g)::text IS DISTINCT FROM convo_private.redact_row('generations', to_jsonb(g))::text
                UNION ALL
                SELECT format('effect %s, requested before it, is not redacted', e.id)
                  FROM e WHERE e.requested_at <= r.erased_at AND e.arguments IS DISTINCT FROM '{}'::jsonb
                UNION ALL
                SELECT format('event seq %s, before it, is not redacted', v.seq)
                  FROM v WHERE v.at <= r.erased_at AND v.evidence IS DISTINCT FROM '{}'::jsonb
                UNION ALL
                SELECT format('the origin of message %s is not redacted', o.message_id)
                  FROM o JOIN m ON m.id = o.message_id
                 WHERE m.created_at <= r.erased_at AND o.node IS DISTINCT FROM '{"erased": true}'::jsonb
                UNION ALL
                SELECT format('place %s is not one an erasure writes', x.place)
                  FROM jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                       x (place text, rows_redacted bigint)
                  LEFT JOIN counts c ON c.place = x.place
                 WHERE c.place IS NULL
                UNION ALL
                SELECT format('place %s counts %s rows, the export holds %s', x.place, x.rows_redacted, c.n)
                  FROM jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                       x (place text, rows_redacted bigint)
                  JOIN counts c ON c.place = x.place
                 WHERE x.rows_redacted > c.n
                LIMIT 1) x
          ORDER BY r.erased_at LIMIT 1)
        UNION ALL
        -- The record of imports.
        (SELECT format('imports: import %s %s', i.id, CASE
                    WHEN i.owner_id IS DISTINCT FROM p_owner_id THEN 'names another owner'
                    WHEN i.format IS NULL OR i.format NOT IN ('chatgpt', 'openwebui', 'librechat', 'pgconvo') THEN 'has an unknown format'
                    ELSE 'is dated after the import' END)
           FROM i
          WHERE i.owner_id IS DISTINCT FROM p_owner_id OR i.format IS NULL
             OR i.format NOT IN ('chatgpt', 'openwebui', 'librechat', 'pgconvo') OR i.imported_at > p_now LIMIT 1)
    ) AS problems (p)
    LIMIT 1;
    RETURN v_problem;
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
