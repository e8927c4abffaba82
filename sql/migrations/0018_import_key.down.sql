-- 0018_import_key down: reverses 0018_import_key.up.sql.

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

-- import_librechat: one conversation of LibreChat's own JSON export (a
-- recursive one, replies nested in children, or a flat list) as a new
-- conversation of p_owner_id, by the rules of import_chatgpt wherever they
-- apply: the whole tree by parentMessageId (the zero UUID or null: a root),
-- messages keyed by messageId, original times (createdAt; without one the
-- parent's, a root the conversation's: its earliest createdAt), user when
-- isCreatedByUser else assistant, the latest leaf as the head (there is no
-- current-leaf field: head_fallback latest_leaf), each message kept in
-- import_origins (a recursive export's without its children, which are
-- messages of their own), the top-level fields in metadata.import. Repeats,
-- CV009, CV011 (naming the message) and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_librechat(p_owner_id text, p_conversation jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_messages  jsonb := p_conversation -> 'messages';
    v_recursive boolean;
    v_source    text;
    v_id        uuid;
    v_digest    text;
    v_where     text;
    v_bad       text[];
    v_nodes     jsonb;
    v_time      timestamptz;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);
    IF p_conversation IS NULL OR jsonb_typeof(p_conversation) <> 'object' THEN
        RAISE EXCEPTION 'p_conversation must be one LibreChat conversation, a JSON object, not %',
                coalesce(jsonb_typeof(p_conversation), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each exported conversation on its own.';
    END IF;
    v_source := coalesce(convo_private.nonempty_text(p_conversation -> 'conversationId'), 'sha:' || md5(p_conversation::text));
    v_id := md5('librechat:' || p_owner_id || ':' || v_source)::uuid;
    v_where := format('LibreChat conversation %s of owner %s, conversation %s', v_source, p_owner_id, v_id);
    v_digest := encode(sha256(convert_to(p_conversation::text, 'UTF8')), 'hex');
    IF convo_private.import_repeat(v_id, p_owner_id, v_digest, v_where) THEN
        RETURN v_id;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'a LibreChat conversation needs a "messages" array, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    v_recursive := p_conversation -> 'recursive' = 'true';
    -- One pass over the messages: the first refusal in document order, the
    -- nodes for import_tree (keyed by messageId: the source parent, the
    -- time, the origin and, when read, the nested children's ids), and the
    -- conversation's time. Parents and duplicates are hash joins.
    WITH f AS MATERIALIZED (
        SELECT x.*,
               CASE WHEN jsonb_typeof(x.message) = 'object' THEN convo_private.nonempty_text(x.message -> 'messageId') END AS id,
               CASE WHEN jsonb_typeof(x.message -> 'parentMessageId') = 'string'
                         AND x.message ->> 'parentMessageId' <> '00000000-0000-0000-0000-000000000000'
                    THEN x.message ->> 'parentMessageId' END AS parent,
               convo_private.iso_time(x.message -> 'createdAt') AS at
          FROM convo_private.librechat_flatten(v_messages, v_recursive) x
    ), ids AS MATERIALIZED (
        SELECT f.id, count(*) AS n FROM f WHERE f.id IS NOT NULL GROUP BY f.id
    ), c AS MATERIALIZED (
        SELECT f.*,
               coalesce(left(f.id, convo_private.max_id_length()),
                        CASE WHEN f.depth = 0 THEN format('messages[%s]', f.ord - 1)
                             ELSE format('children[%s] of message %s', f.ord - 1, coalesce(f.nest_parent, 'without a messageId')) END)
                   AS name,
               CASE WHEN jsonb_typeof(f.message) <> 'object' THEN 'is not an object'
                    WHEN f.id IS NULL THEN 'has no messageId (a non-empty string)'
                    WHEN f.id = '00000000-0000-0000-0000-000000000000'
                        THEN 'has the zero UUID, which means "no parent", as its messageId'
                    WHEN d.n > 1 THEN 'has the messageId of another message too (a duplicate)'
                    WHEN jsonb_typeof(f.message -> 'parentMessageId') NOT IN ('string', 'null')
                        THEN 'has a parentMessageId that is neither a string nor null'
                    WHEN f.parent IS NOT NULL AND p.id IS NULL
                        THEN 'names a parentMessageId that is no message (missing parent)'
                    WHEN jsonb_typeof(f.message -> 'isCreatedByUser') NOT IN ('boolean', 'null')
                        THEN 'has an isCreatedByUser that is neither true nor false'
                    WHEN v_recursive AND jsonb_typeof(f.message -> 'children') NOT IN ('array', 'null')
                        THEN 'has children that are not a list'
                    WHEN jsonb_typeof(f.message -> 'createdAt') NOT IN ('string', 'null')
                         OR (jsonb_typeof(f.message -> 'createdAt') = 'string' AND f.at IS NULL)
                        THEN 'has a createdAt that is not an ISO 8601 time'
                    END AS why
          FROM f
          LEFT JOIN ids d ON d.id = f.id
          LEFT JOIN ids p ON p.id = f.parent
    )
    SELECT (SELECT ARRAY[c.name, c.why] FROM c WHERE c.why IS NOT NULL ORDER BY c.seq LIMIT 1),
           (SELECT coalesce(jsonb_object_agg(c.id, jsonb_build_object('parent', c.parent, 'at', c.at, 'node', c.message)
                                                   || CASE WHEN c.listed THEN jsonb_build_object('children', coalesce(l.children, '[]'))
                                                           ELSE '{}' END), '{}')
              FROM c
              LEFT JOIN (SELECT f.nest_parent, jsonb_agg(f.id ORDER BY f.seq) AS children
                           FROM f WHERE f.nest_parent IS NOT NULL AND f.id IS NOT NULL GROUP BY f.nest_parent) l
                ON l.nest_parent = c.id
             WHERE c.id IS NOT NULL),
           (SELECT min(c.at) FROM c)
      INTO v_bad, v_nodes, v_time;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'LibreChat message % %', v_bad[1], v_bad[2]
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad[1]);
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'librechat', v_nodes, NULL, v_time,
        jsonb_build_object('format', 'librechat', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'messages', 'requested_head', 'null'::jsonb,
                           'digest', v_digest),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_librechat(text, jsonb) IS
    'Import one LibreChat conversation export (recursive or flat; parentMessageId, the latest leaf as the head); a repeat returns the same id.';

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

DROP FUNCTION convo_private.import_key;

-- Reverse the table changes here, below the objects.

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
