-- 0010_import: import_chatgpt and import_openwebui: a ChatGPT or Open WebUI
-- conversation as a message tree with its original times, its source nodes kept.

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
-- The verbatim source node of every imported message (import_chatgpt,
-- import_openwebui), beside the message and off the hot path: path() never
-- reads it. Conversation-scoped keys, so it distributes with the
-- conversation. The foreign key to the message is deferred: the import
-- writes a message's origin before the message, so that the tree and ledger
-- triggers can tell an imported message (convo_private.is_imported) from
-- any other, which no setting can fake.
CREATE TABLE convo.import_origins (
    conversation_id uuid  NOT NULL REFERENCES convo.conversations (id),
    message_id      uuid  NOT NULL,
    source          text  NOT NULL CHECK (source IN ('chatgpt', 'openwebui')),
    node_key        text  NOT NULL,
    node            jsonb NOT NULL,
    PRIMARY KEY (conversation_id, message_id),
    CONSTRAINT import_origins_message_fkey FOREIGN KEY (conversation_id, message_id)
        REFERENCES convo.messages (conversation_id, id) DEFERRABLE INITIALLY DEFERRED
);
COMMENT ON TABLE convo.import_origins IS
    'The source node of each imported message, verbatim (erasure empties it); append-only.';
ALTER TABLE convo.import_origins ENABLE ROW LEVEL SECURITY;
CREATE POLICY import_origins_reader_reads_all ON convo.import_origins FOR SELECT TO convo_reader USING (true);


-- import_chatgpt: one conversation of a ChatGPT export (an element of
-- conversations.json, or a bare conversation object) as a new conversation
-- of p_owner_id, by the rules of import-mapping.md §4: the whole tree with
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
    v_source := coalesce(convo_private.nonempty_text(p_conversation -> 'conversation_id'),
                         convo_private.nonempty_text(p_conversation -> 'id'),
                         'sha:' || md5(p_conversation::text));
    v_id := md5('chatgpt:' || p_owner_id || ':' || v_source)::uuid;
    v_where := format('ChatGPT conversation %s of owner %s, conversation %s', v_source, p_owner_id, v_id);
    v_digest := encode(sha256(convert_to(p_conversation::text, 'UTF8')), 'hex');
    IF convo_private.import_repeat(v_id, p_owner_id, v_digest, v_where) THEN
        RETURN v_id;
    END IF;

    IF jsonb_typeof(v_mapping) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a ChatGPT conversation needs a "mapping" object, not %', coalesce(jsonb_typeof(v_mapping), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    -- The refusals of §4.1, first node by key (bytewise) first.
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

    RETURN convo_private.import_tree(v_id, p_owner_id, 'chatgpt', v_mapping,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        convo_private.epoch_time(p_conversation -> 'create_time', NULL),
        jsonb_build_object('format', 'chatgpt', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'mapping', 'requested_head', coalesce(v_current, 'null'),
                           'digest', v_digest),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_chatgpt(text, jsonb) IS
    'Import one ChatGPT conversation (the whole tree, original times, current_node as the head); a repeat returns the same id.';

-- import_openwebui: one Open WebUI chat (a row of its chat table or of the
-- UI's JSON export, which holds an object "chat", or the bare chat column)
-- as a new conversation of p_owner_id, by the rules of import-mapping.md
-- §5: history.messages by parentId (several roots when the first message
-- was edited; childrenIds that disagree with parentId are only counted),
-- history.currentId as the head, each message kept verbatim in
-- import_origins. Repeats, CV009, CV011 and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_openwebui(p_owner_id text, p_chat jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_row      jsonb;
    v_chat     jsonb;
    v_messages jsonb;
    v_current  jsonb;
    v_source   text;
    v_id       uuid;
    v_digest   text;
    v_where    text;
    v_bad      record;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);
    IF p_chat IS NULL OR jsonb_typeof(p_chat) <> 'object' THEN
        RAISE EXCEPTION 'p_chat must be one Open WebUI chat, a JSON object, not %', coalesce(jsonb_typeof(p_chat), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each element of an Open WebUI export on its own.';
    END IF;
    IF jsonb_typeof(p_chat -> 'chat') = 'object' THEN
        v_row := p_chat;
        v_chat := p_chat -> 'chat';
    ELSE
        v_chat := p_chat;
    END IF;
    v_messages := v_chat -> 'history' -> 'messages';
    v_current := v_chat -> 'history' -> 'currentId';
    v_source := coalesce(convo_private.nonempty_text(v_row -> 'id'), convo_private.nonempty_text(v_chat -> 'id'),
                         'sha:' || md5(p_chat::text));
    v_id := md5('openwebui:' || p_owner_id || ':' || v_source)::uuid;
    v_where := format('Open WebUI chat %s of owner %s, conversation %s', v_source, p_owner_id, v_id);
    v_digest := encode(sha256(convert_to(p_chat::text, 'UTF8')), 'hex');
    IF convo_private.import_repeat(v_id, p_owner_id, v_digest, v_where) THEN
        RETURN v_id;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'an Open WebUI chat needs a "history.messages" object, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    SELECT e.key, e.why INTO v_bad
      FROM (SELECT n.key, CASE
                   WHEN jsonb_typeof(n.msg) <> 'object' THEN 'is not an object'
                   WHEN jsonb_typeof(n.msg -> 'id') NOT IN ('null') AND n.msg -> 'id' <> to_jsonb(n.key)
                       THEN 'has an id other than its key'
                   WHEN jsonb_typeof(n.msg -> 'role') IS DISTINCT FROM 'string'
                        OR n.msg ->> 'role' NOT IN ('user', 'assistant', 'system')
                       THEN 'has a missing or unknown role'
                   WHEN jsonb_typeof(n.msg -> 'parentId') NOT IN ('null')
                        AND (jsonb_typeof(n.msg -> 'parentId') <> 'string' OR NOT v_messages ? (n.msg ->> 'parentId'))
                       THEN 'names a parentId that is no message (missing parent)'
                   WHEN jsonb_typeof(n.msg -> 'childrenIds') NOT IN ('array', 'null')
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.msg -> 'childrenIds') = 'array'
                                                                           THEN n.msg -> 'childrenIds' END) c (child)
                                    WHERE jsonb_typeof(c.child) <> 'string')
                       THEN 'has childrenIds that are not an array of strings'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') NOT IN ('number', 'null')
                       THEN 'has a timestamp that is neither a number nor null'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') = 'number'
                        AND convo_private.epoch_time(n.msg -> 'timestamp', 1e11) IS NULL
                       THEN 'has a timestamp outside years 1 to 9999'
                   END AS why
              FROM jsonb_each(v_messages) AS n (key, msg)) e
     WHERE e.why IS NOT NULL
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'Open WebUI message % %', v_bad.key, v_bad.why
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad.key);
    END IF;
    IF jsonb_typeof(v_current) IS DISTINCT FROM 'null' AND v_current IS NOT NULL
       AND (jsonb_typeof(v_current) <> 'string' OR NOT v_messages ? (v_current #>> '{}')) THEN
        RAISE EXCEPTION 'history.currentId names no message'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, currentId %s', v_where, left(v_current::text, convo_private.max_id_length()));
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'openwebui', v_messages,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        coalesce(convo_private.epoch_time(v_row -> 'created_at', 1e11), convo_private.epoch_time(v_chat -> 'timestamp', 1e11)),
        jsonb_build_object('format', 'openwebui', 'source_id', v_source,
                           'title', coalesce(nullif(v_row -> 'title', 'null'), v_chat -> 'title'),
                           'chat', v_chat - 'history' - 'messages', 'row', v_row - 'chat',
                           'requested_head', coalesce(v_current, 'null'), 'digest', v_digest),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_openwebui(text, jsonb) IS
    'Import one Open WebUI chat (history.messages by parentId, currentId as the head); a repeat returns the same id.';

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
                        'erasures', 'erasure_places', 'live_path',
                        'import_origins']) AS t (name)
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

-- chatgpt_message: the role and parts of an imported ChatGPT message
-- (import-mapping.md §4.7, §4.8), given its imported parent: a tool call
-- is one tool_use (id: the node key, input: the whole content); a tool
-- message answering its parent's call is a tool_result (content: the whole
-- content) and its images; anything else is chatgpt_render's parts, with
-- user and model context as system messages. Then the code interpreter's
-- images and the attachments no image names. Only the four part types.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_message(p_key text, p_message jsonb, p_parent_key text, p_parent jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role    text := p_message -> 'author' ->> 'role';
    v_content jsonb := p_message -> 'content';
    v_ct      text := p_message -> 'content' ->> 'content_type';
    v_meta    jsonb := CASE WHEN jsonb_typeof(p_message -> 'metadata') = 'object' THEN p_message -> 'metadata' ELSE '{}' END;
    v_items   jsonb;
BEGIN
    IF convo_private.chatgpt_is_call(p_message) THEN
        RETURN jsonb_build_object('role', 'assistant', 'parts', jsonb_build_array(jsonb_build_object(
            'type', 'tool_use', 'id', p_key, 'name', p_message ->> 'recipient', 'input', v_content)));
    END IF;
    IF v_role = 'tool' AND convo_private.chatgpt_is_call(p_parent)
       AND (jsonb_typeof(p_message -> 'author' -> 'name') IS DISTINCT FROM 'string'
            OR p_message -> 'author' ->> 'name' = p_parent ->> 'recipient') THEN
        v_items := jsonb_build_array(jsonb_build_object('type', 'tool_result', 'tool_use_id', p_parent_key, 'content', v_content,
                       'is_error', v_ct = 'system_error'
                                   OR coalesce(convo_private.nonempty_text(v_meta -> 'aggregate_result' -> 'status'), 'success') <> 'success'))
                   || coalesce((SELECT jsonb_agg(jsonb_build_object('pointer', x.e ->> 'asset_pointer') ORDER BY x.n)
                                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_content -> 'parts') = 'array'
                                                                 THEN v_content -> 'parts' ELSE '[]'::jsonb END) WITH ORDINALITY AS x (e, n)
                                 WHERE convo_private.nonempty_text(x.e -> 'asset_pointer') IS NOT NULL), '[]'::jsonb);
    ELSE
        v_items := convo_private.chatgpt_render(v_content);
        IF v_ct IN ('user_editable_context', 'model_editable_context') THEN
            v_role := 'system';
        END IF;
    END IF;
    v_items := v_items || coalesce((SELECT jsonb_agg(jsonb_build_object('pointer', x.e ->> 'image_url') ORDER BY x.n)
                                      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_meta -> 'aggregate_result' -> 'messages') = 'array'
                                                                     THEN v_meta -> 'aggregate_result' -> 'messages' ELSE '[]'::jsonb END)
                                           WITH ORDINALITY AS x (e, n)
                                     WHERE convo_private.nonempty_text(x.e -> 'image_url') IS NOT NULL), '[]'::jsonb);
    RETURN jsonb_build_object('role', v_role, 'parts', convo_private.chatgpt_attach(v_items, v_meta -> 'attachments'));
END;
$$;

-- chatgpt_render: a ChatGPT message's content as parts, by content type
-- (import-mapping.md §4.8, case 3), as a JSON array of items: a part, or
-- {"pointer": uri} for an image asset, which chatgpt_attach makes an
-- attachment. Never empty. A content type it does not know, or one whose
-- field has an unexpected type, becomes one text part that says so and
-- holds the whole content; an element it does not know, one that holds the element.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_render(p_content jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ct    text := p_content ->> 'content_type';
    v_field text := CASE WHEN v_ct IN ('text', 'multimodal_text') THEN 'parts'
                         WHEN v_ct IN ('code', 'execution_output', 'tether_quote', 'sonic_webpage', 'system_error') THEN 'text'
                         WHEN v_ct = 'tether_browsing_display' THEN 'result'
                         WHEN v_ct = 'reasoning_recap' THEN 'content'
                         WHEN v_ct = 'thoughts' THEN 'thoughts'
                         WHEN v_ct = 'model_editable_context' THEN 'model_set_context' END;
    v_kind  text := coalesce(jsonb_typeof(p_content -> v_field), 'null');
    v_out   jsonb;
BEGIN
    IF v_field IN ('parts', 'thoughts') AND v_kind IN ('array', 'null') THEN
        SELECT jsonb_agg(CASE
                   WHEN v_field = 'parts' AND jsonb_typeof(x.e) = 'string'
                       THEN jsonb_build_object('type', 'text', 'text', x.e #>> '{}')
                   WHEN v_ct = 'multimodal_text' AND convo_private.nonempty_text(x.e -> 'asset_pointer') IS NOT NULL
                       THEN jsonb_build_object('pointer', x.e ->> 'asset_pointer')
                   WHEN v_ct = 'multimodal_text' AND x.e ->> 'content_type' = 'audio_transcription'
                       THEN jsonb_build_object('type', 'text', 'text', coalesce(x.e ->> 'text', ''))
                   WHEN v_field = 'thoughts' AND jsonb_typeof(x.e) = 'object'
                       THEN jsonb_build_object('type', 'text', 'text',
                                CASE WHEN coalesce(x.e ->> 'content', '') = '' THEN coalesce(x.e ->> 'summary', '')
                                     ELSE coalesce(x.e ->> 'summary', '') || E'\n\n' || (x.e ->> 'content') END)
                   ELSE jsonb_build_object('type', 'text', 'text', '[unmapped chatgpt part '
                            || coalesce(x.e ->> 'content_type', jsonb_typeof(x.e)) || '] ' || x.e::text)
               END ORDER BY x.n)
          INTO v_out
          FROM jsonb_array_elements(CASE WHEN v_kind = 'array' THEN p_content -> v_field ELSE '[]'::jsonb END)
               WITH ORDINALITY AS x (e, n);
        RETURN coalesce(v_out, '[{"type": "text", "text": ""}]'::jsonb);
    ELSIF v_field IS NOT NULL AND v_kind IN ('string', 'null') THEN
        RETURN jsonb_build_array(jsonb_build_object('type', 'text', 'text', coalesce(p_content ->> v_field, '')));
    ELSIF v_ct = 'user_editable_context' THEN
        RETURN jsonb_build_array(jsonb_build_object('type', 'text', 'text', coalesce(p_content ->> 'user_profile', '')),
                                 jsonb_build_object('type', 'text', 'text', coalesce(p_content ->> 'user_instructions', '')));
    END IF;
    RETURN jsonb_build_array(jsonb_build_object('type', 'text', 'text',
        '[unmapped chatgpt content_type ' || coalesce(v_ct, 'null') || '] ' || p_content::text));
END;
$$;

-- check_import_owner: the owner checks of an import, as create_conversation
-- makes them: an owner is required, at most max_id_length characters, and
-- a convo_app session imports only for the owner it set (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo_private.check_import_owner(p_owner_id text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL'));
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not import conversations for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
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
            ('import_origins', 'node', 'conversation_id'),
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

-- import_repeat: whether an import's conversation id is already taken:
-- false if not; true if by this very import (same owner, and the same
-- source text, by its digest in metadata.import): a repeat, which writes
-- nothing; CV009 if by anything else (the same source with other content,
-- a later export of a conversation that went on, or an erased one). Locks
-- the row as every writer does.
CREATE OR REPLACE FUNCTION convo_private.import_repeat(p_conversation_id uuid, p_owner_id text, p_digest text, p_where text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_existing convo.conversations;
BEGIN
    SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = p_conversation_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_existing.owner_id = p_owner_id AND v_existing.metadata -> 'import' ->> 'digest' = p_digest THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'conversation % was imported before from the same source with other content', p_conversation_id
        USING ERRCODE = 'CV009', DETAIL = p_where,
              HINT = 'An import is not merged into an earlier one: the source changed since it was imported.';
END;
$$;

-- import_tree: the shared second half of import_chatgpt and import_openwebui,
-- once the source is checked: the tree (import-mapping.md §4.3-§4.6, §4.10,
-- §4.12) written as one new conversation. Imported messages are the nodes
-- whose message is an object; each hangs under its nearest imported
-- ancestor (import_walk) with its original time; siblings are inserted in
-- the order (time, position in the source parent's children, key bytewise),
-- which is their sibling_index, with branch reasons by role; the head is
-- the nearest imported node at or above p_current, else the latest leaf;
-- each message's source node is kept in import_origins. Caps are checked
-- first (CV010 naming the node); no ledger row, receipt or generation is
-- written. Every step is a pass or a hash join over the nodes: linear.
CREATE OR REPLACE FUNCTION convo_private.import_tree(
    p_conversation_id uuid,
    p_owner_id        text,
    p_source          text,
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
           (SELECT count(*)
              FROM (SELECT n.parent_key, n.key FROM n WHERE n.parent_key IS NOT NULL) a
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

    INSERT INTO convo.conversations (id, owner_id, metadata, created_at)
    VALUES (p_conversation_id, p_owner_id, v_metadata,
            coalesce(p_conv_time, (SELECT min(a) FROM unnest(m_at) AS a), v_now))
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- The same import committed by another session meanwhile.
        PERFORM convo_private.import_repeat(p_conversation_id, p_owner_id, p_metadata ->> 'digest', p_where);
        RETURN p_conversation_id;
    END IF;

    -- Origins first (their foreign key is deferred), then the messages,
    -- parents before children, siblings in order: messages_fill_tree keeps
    -- their times and numbers them, record_tool_call writes no ledger row.
    SET CONSTRAINTS convo.import_origins_message_fkey DEFERRED;
    PERFORM set_config('convo.importing', p_conversation_id::text, true);
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT p_conversation_id, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts, created_at)
    SELECT p_conversation_id, x.id, x.parent, x.role, x.reason, x.parts, x.at
      FROM unnest(m_id, m_parent, m_role, m_reason, m_parts, m_at) WITH ORDINALITY AS x (id, parent, role, reason, parts, at, n)
     ORDER BY x.n;
    PERFORM set_config('convo.importing', '', true);
    IF v_head IS NOT NULL THEN
        PERFORM convo_private.move_head_to(p_conversation_id, v_head, 'import', NULL);
    END IF;
    RETURN p_conversation_id;
END;
$$;

-- import_walk: one pass over an import's source tree, given as arrays in key
-- order (p_parent: the index of each node's source parent, 0 for none).
-- For each node: its imported parent (the nearest imported strict ancestor,
-- 0 for none: a root), its depth among imported messages, and its time (its
-- own, else its imported parent's, else p_root_time). Each node is pushed
-- on a stack once and resolved once, after its ancestors: linear in the
-- nodes. A node that is its own ancestor (a cycle) is CV011, naming it.
CREATE OR REPLACE FUNCTION convo_private.import_walk(
    p_keys text[], p_parent int[], p_imported boolean[], p_time timestamptz[], p_root_time timestamptz, p_where text,
    OUT o_parent int[], OUT o_depth int[], OUT o_at timestamptz[])
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n     int := coalesce(cardinality(p_keys), 0);
    v_state int[] := array_fill(0, ARRAY[v_n]); -- 0 unseen, 1 on the stack, 2 resolved
    v_stack int[] := array_fill(0, ARRAY[v_n]);
    v_sp    int;
    v_j     int;
    v_k     int;
    v_p     int;
    v_ip    int;
BEGIN
    o_parent := array_fill(0, ARRAY[v_n]);
    o_depth := array_fill(0, ARRAY[v_n]);
    o_at := array_fill(NULL::timestamptz, ARRAY[v_n]);
    FOR v_i IN 1 .. v_n LOOP
        CONTINUE WHEN v_state[v_i] = 2;
        -- Climb until a root or a resolved node.
        v_sp := 0;
        v_j := v_i;
        WHILE v_j > 0 AND v_state[v_j] = 0 LOOP
            v_state[v_j] := 1;
            v_sp := v_sp + 1;
            v_stack[v_sp] := v_j;
            v_j := p_parent[v_j];
        END LOOP;
        IF v_j > 0 AND v_state[v_j] = 1 THEN
            RAISE EXCEPTION 'node % is its own ancestor: following its parents never reaches a root', p_keys[v_j]
                USING ERRCODE = 'CV011', DETAIL = format('%s, node %s', p_where, p_keys[v_j]);
        END IF;
        -- Resolve down again, ancestors first.
        WHILE v_sp > 0 LOOP
            v_k := v_stack[v_sp];
            v_sp := v_sp - 1;
            v_p := p_parent[v_k];
            v_ip := CASE WHEN v_p = 0 THEN 0 WHEN p_imported[v_p] THEN v_p ELSE o_parent[v_p] END;
            o_parent[v_k] := v_ip;
            o_depth[v_k] := CASE WHEN v_ip = 0 THEN 0 ELSE o_depth[v_ip] + 1 END;
            o_at[v_k] := coalesce(p_time[v_k], CASE WHEN v_ip = 0 THEN p_root_time ELSE o_at[v_ip] END);
            v_state[v_k] := 2;
        END LOOP;
    END LOOP;
END;
$$;

-- messages_fill_tree: checks a new message's role and parts and computes its
-- place in the tree (depth, sibling_index, branch_id, created_at) from its
-- parent, whoever inserts it, under the conversation's row lock so that
-- concurrent writers serialize. Its time is the insert's, except for a
-- message an import is writing (is_imported), which keeps its original time.
-- The last sibling is read as the first row of messages_sibling_key in
-- reverse (ORDER BY ... LIMIT 1, parent_id in the order too, so that IS
-- NULL for a root keeps the index order): one probe whatever the number of
-- siblings or roots, even on statistics from when the table was empty.
-- A new sibling of a message on the live path raises that message's
-- sibling_count in convo.live_path.
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
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id IS NULL
                                        ORDER BY m.parent_id DESC, m.sibling_index DESC LIMIT 1), 0) + 1;
        NEW.branch_id := NEW.id;
    ELSE
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        NEW.depth := v_parent.depth + 1;
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id = NEW.parent_id
                                        ORDER BY m.sibling_index DESC LIMIT 1), 0) + 1;
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
    IF NOT convo_private.is_imported(NEW.conversation_id, NEW.id) OR NEW.created_at IS NULL THEN
        NEW.created_at := clock_timestamp();
    END IF;
    RETURN NEW;
END;
$$;

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment. An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered), and neither
-- does an imported call (is_imported): imported history happened elsewhere.
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
    IF convo_private.is_imported(NEW.conversation_id, NEW.message_id) THEN
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

-- nonempty_text: the text of a JSON value that is a non-empty string, else
-- NULL: how the import functions read an optional field of a source file.
CREATE OR REPLACE FUNCTION convo_private.nonempty_text(p_value jsonb)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(p_value) = 'string' AND p_value #>> '{}' <> '' THEN p_value #>> '{}' END;

-- chatgpt_attach: a ChatGPT message's parts from chatgpt_message's items:
-- each {"pointer": uri} becomes an attachment whose media type is the
-- mime_type of the metadata.attachments entry the pointer names (its id is
-- the uri without its file-service:// or sediment:// scheme), else
-- application/octet-stream; then each attachment no pointer names (an
-- uploaded PDF, say) becomes a chatgpt-attachment:<id> attachment, and an
-- entry without an id a text part that says so. One hash join: linear.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_attach(p_items jsonb, p_attachments jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    WITH att AS (
        SELECT a.n, a.e, convo_private.nonempty_text(a.e -> 'id') AS id,
               convo_private.nonempty_text(a.e -> 'mime_type') AS mime
          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_attachments) = 'array' THEN p_attachments ELSE '[]'::jsonb END)
               WITH ORDINALITY AS a (e, n)
    ), mime AS (
        SELECT DISTINCT ON (att.id) att.id, att.mime FROM att WHERE att.id IS NOT NULL ORDER BY att.id, att.n
    ), items AS (
        SELECT i.n, i.e, regexp_replace(i.e ->> 'pointer', '^(file-service|sediment)://', '') AS ref
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS i (e, n)
    )
    SELECT jsonb_agg(x.part ORDER BY x.k, x.n)
      FROM (SELECT 0 AS k, items.n,
                   CASE WHEN items.e ? 'pointer'
                        THEN jsonb_build_object('type', 'attachment', 'uri', items.e ->> 'pointer',
                                                'media_type', coalesce(mime.mime, 'application/octet-stream'))
                        ELSE items.e END AS part
              FROM items LEFT JOIN mime ON mime.id = items.ref
            UNION ALL
            SELECT 1, att.n,
                   CASE WHEN att.id IS NULL
                        THEN jsonb_build_object('type', 'text', 'text', '[unmapped chatgpt attachment] ' || att.e::text)
                        ELSE jsonb_build_object('type', 'attachment', 'uri', 'chatgpt-attachment:' || att.id,
                                                'media_type', coalesce(att.mime, 'application/octet-stream')) END
              FROM att
             WHERE att.id IS NULL OR NOT EXISTS (SELECT 1 FROM items WHERE items.ref = att.id)) x;
END;

-- chatgpt_is_call: whether a ChatGPT message is a tool call: an assistant
-- message whose recipient is a tool (a non-empty string other than "all"),
-- whatever its content type.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_is_call(p_message jsonb)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN coalesce(p_message -> 'author' ->> 'role' = 'assistant'
                AND convo_private.nonempty_text(p_message -> 'recipient') <> 'all', false);

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
                                       'max_ref_length', 'request_messages', 'request_digest',
                                       'import_chatgpt', 'import_openwebui']),
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

-- epoch_time: a source file's time, epoch seconds as a JSON number, as a
-- timestamptz to the microsecond (computed in numeric, so no float
-- rounding); a value above p_ms_above (when given) is read as
-- milliseconds. NULL when it is not a number or lies outside years 1 to 9999.
CREATE OR REPLACE FUNCTION convo_private.epoch_time(p_value jsonb, p_ms_above numeric)
RETURNS timestamptz
LANGUAGE sql
IMMUTABLE
RETURN (SELECT CASE WHEN x.s BETWEEN -62135596800 AND 253402300799
                    THEN timestamptz 'epoch' + round(x.s * 1000000)::float8 * interval '1 microsecond' END
          FROM (SELECT CASE WHEN p_ms_above IS NOT NULL AND p_value::numeric > p_ms_above
                            THEN p_value::numeric / 1000 ELSE p_value::numeric END AS s
                 WHERE jsonb_typeof(p_value) = 'number') x);

-- import_nodes: the nodes of an import's source tree (a ChatGPT mapping or
-- Open WebUI's history.messages), numbered in bytewise key order, each with
-- its source parent's key, its children list, its message (NULL or not an
-- object: not imported), the node verbatim and its own time, if any.
CREATE OR REPLACE FUNCTION convo_private.import_nodes(p_source text, p_mapping jsonb)
RETURNS TABLE (idx int, key text, parent_key text, children jsonb, message jsonb, node jsonb, at timestamptz)
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT (row_number() OVER (ORDER BY e.key COLLATE "C"))::int, e.key,
           e.node ->> CASE p_source WHEN 'chatgpt' THEN 'parent' ELSE 'parentId' END,
           e.node -> CASE p_source WHEN 'chatgpt' THEN 'children' ELSE 'childrenIds' END,
           CASE p_source WHEN 'chatgpt' THEN e.node -> 'message' ELSE e.node END,
           e.node,
           CASE p_source WHEN 'chatgpt' THEN convo_private.epoch_time(e.node -> 'message' -> 'create_time', NULL)
                ELSE convo_private.epoch_time(e.node -> 'timestamp', 1e11) END
      FROM jsonb_each(p_mapping) AS e (key, node);
END;

-- is_imported: whether a message being inserted is one an import is writing:
-- the transaction's import names its conversation (a cheap filter any
-- session could set) and the message's origin record exists, which only
-- the import functions write (import_origins_no_forgery) and only before
-- their messages. messages_fill_tree then keeps its original time, and
-- record_tool_call writes no ledger row for it.
CREATE OR REPLACE FUNCTION convo_private.is_imported(p_conversation_id uuid, p_message_id uuid)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN coalesce(current_setting('convo.importing', true) = p_conversation_id::text, false)
   AND EXISTS (SELECT 1 FROM convo.import_origins o
                WHERE o.conversation_id = p_conversation_id AND o.message_id = p_message_id);

-- openwebui_file: one element of an Open WebUI message's files as a part:
-- an attachment whose uri is its url (a data: URI kept whole), else
-- openwebui-file:<file.id or id>, and whose media type is the data: URI's,
-- else file.meta.content_type, meta.content_type or content_type, else
-- application/octet-stream; an element with neither url nor id is a text
-- part that says so and holds it.
CREATE OR REPLACE FUNCTION convo_private.openwebui_file(p_file jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    SELECT CASE WHEN x.uri IS NULL
                THEN jsonb_build_object('type', 'text', 'text', '[unmapped openwebui file] ' || p_file::text)
                ELSE jsonb_build_object('type', 'attachment', 'uri', x.uri, 'media_type',
                         coalesce(substring(x.url FROM '^data:([^;,]+)'),
                                  convo_private.nonempty_text(p_file -> 'file' -> 'meta' -> 'content_type'),
                                  convo_private.nonempty_text(p_file -> 'meta' -> 'content_type'),
                                  convo_private.nonempty_text(p_file -> 'content_type'),
                                  'application/octet-stream')) END
      FROM (SELECT u.url, coalesce(u.url, 'openwebui-file:' || coalesce(convo_private.nonempty_text(p_file -> 'file' -> 'id'),
                                                                       convo_private.nonempty_text(p_file -> 'id'))) AS uri
              FROM (SELECT convo_private.nonempty_text(p_file -> 'url') AS url) u) x;
END;

-- openwebui_message: the role and parts of an imported Open WebUI message
-- (import-mapping.md §5): its content verbatim as one text part (inline
-- <details> blocks included: they are not split into tool calls), then one
-- part per element of files (openwebui_file). Content that is not a string
-- (or files that are not a list) becomes a text part that says so and holds it.
CREATE OR REPLACE FUNCTION convo_private.openwebui_message(p_message jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    SELECT jsonb_build_object('role', p_message ->> 'role', 'parts',
        jsonb_build_array(CASE WHEN jsonb_typeof(p_message -> 'content') = 'string'
                               THEN jsonb_build_object('type', 'text', 'text', p_message ->> 'content')
                               WHEN p_message -> 'content' IS NULL THEN jsonb_build_object('type', 'text', 'text', '')
                               ELSE jsonb_build_object('type', 'text', 'text',
                                        '[unmapped openwebui content] ' || (p_message -> 'content')::text) END)
        || CASE coalesce(jsonb_typeof(p_message -> 'files'), 'null')
               WHEN 'array' THEN coalesce((SELECT jsonb_agg(convo_private.openwebui_file(f.e) ORDER BY f.n)
                                             FROM jsonb_array_elements(p_message -> 'files') WITH ORDINALITY AS f (e, n)), '[]'::jsonb)
               WHEN 'null' THEN '[]'::jsonb
               ELSE jsonb_build_array(jsonb_build_object('type', 'text', 'text',
                        '[unmapped openwebui file] ' || (p_message -> 'files')::text)) END);
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
        ('import_origins', 'import_origins_append_only', 'append_only'),
        ('import_origins', 'import_origins_erasure_only', 'append_only'),
        ('import_origins', 'import_origins_no_forgery', 'append_only'),
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
-- arguments, event evidence, an imported message's source node, a
-- receipt's request, arguments and expected values. Idempotent. erase_content writes it; is_erasure lets only it through.
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
    WHEN 'import_origins' THEN '{"node": {"erased": true}}'::jsonb
    WHEN 'tool_receipts' THEN jsonb_build_object('request', '{}'::jsonb,
        'arguments', CASE WHEN jsonb_typeof(p_row -> 'arguments') <> 'null' THEN '{}'::jsonb END,
        'expected', CASE WHEN jsonb_typeof(p_row -> 'expected') <> 'null' THEN '{}'::jsonb END)
END;

-- import_origins_append_only: an import's origin records are never deleted:
-- DELETE and TRUNCATE are refused for every role (UPDATE: import_origins_erasure_only).
CREATE OR REPLACE TRIGGER import_origins_append_only
    BEFORE DELETE OR TRUNCATE ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_append_only;

-- import_origins_erasure_only: an origin record changes only by erasure
-- (exactly its redaction, in a transaction that recorded it).
CREATE OR REPLACE TRIGGER import_origins_erasure_only
    BEFORE UPDATE ON convo.import_origins
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_erasure_only;

-- import_origins_no_forgery: only the import functions write origin records
-- (an origin is what marks a message as imported: is_imported).
CREATE OR REPLACE TRIGGER import_origins_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_no_forgery;

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
