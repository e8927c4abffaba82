-- 0015_librechat: import_librechat: a LibreChat export (flat or recursive) as a
-- message tree with its original times, its source messages kept.

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
-- import_origins.source names the import that wrote the row: LibreChat's
-- export (import_librechat) is a third.
ALTER TABLE convo.import_origins DROP CONSTRAINT import_origins_source_check;
ALTER TABLE convo.import_origins ADD CONSTRAINT import_origins_source_check
    CHECK (source IN ('chatgpt', 'openwebui', 'librechat'));


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

-- import_tree: the shared second half of import_chatgpt, import_openwebui
-- and import_librechat, once the source is checked: the tree (import-mapping.md §4.3-§4.6, §4.10,
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

-- iso_time: a source file's time as an ISO 8601 string (LibreChat's
-- createdAt, as JavaScript's toISOString writes it) as a timestamptz:
-- YYYY-MM-DD, optionally Thh:mm[:ss[.fraction]] and Z or an offset; without
-- an offset, UTC (never the session's time zone). NULL when it is not a
-- string of that form or names no instant (month 13, 30 February, year 0):
-- the cast's own errors are caught, so no other form the cast accepts
-- ('now', 'yesterday', 'May 1 2024') is read.
CREATE OR REPLACE FUNCTION convo_private.iso_time(p_value jsonb)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_text text := CASE WHEN jsonb_typeof(p_value) = 'string' THEN p_value #>> '{}' END;
    v_part text[] := regexp_match(v_text,
        '^(\d{4}-\d{2}-\d{2})(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?$');
BEGIN
    IF v_part IS NULL OR (v_part[2] IS NULL AND v_part[5] IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    IF v_part[5] IS NULL THEN
        RETURN v_text::timestamp AT TIME ZONE 'UTC';
    END IF;
    RETURN v_text::timestamptz;
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END;
$$;

-- librechat_flatten: the messages of a LibreChat export as rows in document
-- order (seq, preorder), each with its nesting depth, the messageId of the
-- message it is nested under (NULL at the top), its position there (ord,
-- from 1) and whether its children were read. A recursive export nests
-- replies in each message's children: they are flattened with a stack of
-- children lists, each message read once, preorder, and returned
-- without its children (each child is a row of its own, so nothing is
-- kept twice). A flat export's children are not read: its messages come
-- back verbatim. Memory stays within the document's size; but jsonb hands
-- out a nested value only as a copy, so a message's subtree is copied once
-- per level above it: the time is the size times the nesting depth, which
-- is capped (max_librechat_nesting, CV010 past it) so that it stays linear.
CREATE OR REPLACE FUNCTION convo_private.librechat_flatten(p_messages jsonb, p_recursive boolean)
RETURNS TABLE (seq int, depth int, nest_parent text, ord int, message jsonb, listed boolean)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a stack of frames: a list of messages, the next index in it, the
    -- messageId of the message it is the children of
    v_frames jsonb[] := ARRAY[p_messages];
    v_next   int[] := ARRAY[0];
    v_owner  text[] := ARRAY[NULL::text];
    v_top    int := 1;
    v_m      jsonb;
BEGIN
    seq := 0;
    WHILE v_top > 0 LOOP
        IF v_next[v_top] >= jsonb_array_length(v_frames[v_top]) THEN
            v_frames[v_top] := NULL;
            v_top := v_top - 1;
            CONTINUE;
        END IF;
        v_m := v_frames[v_top] -> v_next[v_top];
        v_next[v_top] := v_next[v_top] + 1;
        seq := seq + 1;
        depth := v_top - 1;
        nest_parent := v_owner[v_top];
        ord := v_next[v_top];
        listed := p_recursive AND jsonb_typeof(v_m) = 'object' AND jsonb_typeof(v_m -> 'children') = 'array';
        message := CASE WHEN listed THEN v_m - 'children' ELSE v_m END;
        RETURN NEXT;
        IF listed AND v_top >= convo_private.max_librechat_nesting()
           AND jsonb_array_length(v_m -> 'children') > 0 THEN
            RAISE EXCEPTION 'a recursive LibreChat export nests deeper than % levels', convo_private.max_librechat_nesting()
                USING ERRCODE = 'CV010',
                      DETAIL = format('message %s, at nesting depth %s', coalesce(convo_private.nonempty_text(v_m -> 'messageId'),
                                                                              'without a messageId'), v_top - 1),
                      HINT = 'Export the conversation from LibreChat as a flat list (recursive off): it has no such limit.';
        END IF;
        IF listed THEN
            v_top := v_top + 1;
            v_frames[v_top] := v_m -> 'children';
            v_next[v_top] := 0;
            v_owner[v_top] := convo_private.nonempty_text(v_m -> 'messageId');
        END IF;
    END LOOP;
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
                                       'max_ref_length', 'request_messages', 'request_digest',
                                       'import_chatgpt', 'import_openwebui', 'import_librechat',
                                       'export_conversation', 'import_conversation']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length', 'request_messages', 'request_digest',
                                          'export_conversation']),
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

-- import_nodes: the nodes of an import's source tree (a ChatGPT mapping,
-- Open WebUI's history.messages, or the nodes import_librechat makes of a
-- LibreChat export: {parent, at, node, children when read} by messageId),
-- numbered in bytewise key order, each with its source parent's key, its
-- children list, its message (NULL or not an object: not imported), the
-- node verbatim and its own time, if any.
CREATE OR REPLACE FUNCTION convo_private.import_nodes(p_source text, p_mapping jsonb)
RETURNS TABLE (idx int, key text, parent_key text, children jsonb, message jsonb, node jsonb, at timestamptz)
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT (row_number() OVER (ORDER BY e.key COLLATE "C"))::int, e.key,
           e.node ->> CASE p_source WHEN 'openwebui' THEN 'parentId' ELSE 'parent' END,
           e.node -> CASE p_source WHEN 'openwebui' THEN 'childrenIds' ELSE 'children' END,
           CASE p_source WHEN 'chatgpt' THEN e.node -> 'message' WHEN 'librechat' THEN e.node -> 'node' ELSE e.node END,
           CASE p_source WHEN 'librechat' THEN e.node -> 'node' ELSE e.node END,
           CASE p_source WHEN 'chatgpt' THEN convo_private.epoch_time(e.node -> 'message' -> 'create_time', NULL)
                         WHEN 'librechat' THEN (e.node ->> 'at')::timestamptz
                ELSE convo_private.epoch_time(e.node -> 'timestamp', 1e11) END
      FROM jsonb_each(p_mapping) AS e (key, node);
END;

-- librechat_message: the role and parts of an imported LibreChat message:
-- user when isCreatedByUser is true, else assistant (sender is a display
-- label, kept in the origin only). A non-empty content array (what the UI
-- shows when present) gives one part per element: a text part for
-- {"type": "text"} with a string text or text.value, else a text part that
-- says so and holds the element; otherwise one text part with text
-- (missing or null: empty; not a string: a part that says so), then, for
-- a content that is neither an array nor null, a part that holds it.
CREATE OR REPLACE FUNCTION convo_private.librechat_message(p_message jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    SELECT jsonb_build_object('role', CASE WHEN p_message -> 'isCreatedByUser' = 'true' THEN 'user' ELSE 'assistant' END,
        'parts', CASE
            WHEN jsonb_typeof(p_message -> 'content') = 'array' AND jsonb_array_length(p_message -> 'content') > 0
                THEN (SELECT jsonb_agg(jsonb_build_object('type', 'text', 'text', CASE
                                 WHEN c.part ->> 'type' = 'text' AND jsonb_typeof(c.part -> 'text') = 'string'
                                     THEN c.part ->> 'text'
                                 WHEN c.part ->> 'type' = 'text' AND jsonb_typeof(c.part -> 'text' -> 'value') = 'string'
                                     THEN c.part -> 'text' ->> 'value'
                                 ELSE '[unmapped librechat part '
                                      || coalesce(convo_private.nonempty_text(c.part -> 'type'), jsonb_typeof(c.part))
                                      || '] ' || c.part::text END) ORDER BY c.n)
                        FROM jsonb_array_elements(p_message -> 'content') WITH ORDINALITY AS c (part, n))
            ELSE jsonb_build_array(jsonb_build_object('type', 'text', 'text', CASE
                         WHEN jsonb_typeof(p_message -> 'text') = 'string' THEN p_message ->> 'text'
                         WHEN coalesce(jsonb_typeof(p_message -> 'text'), 'null') = 'null' THEN ''
                         ELSE '[unmapped librechat text] ' || (p_message -> 'text')::text END))
                 || CASE WHEN coalesce(jsonb_typeof(p_message -> 'content'), 'null') IN ('null', 'array') THEN '[]'::jsonb
                         ELSE jsonb_build_array(jsonb_build_object('type', 'text', 'text',
                                  '[unmapped librechat content] ' || (p_message -> 'content')::text)) END
            END);
END;

-- max_librechat_nesting: how deep a recursive LibreChat export may nest its
-- replies (each reply sits in its parent's children): 256 levels.
-- librechat_flatten copies a nested value once per level above it (jsonb
-- hands out sub-values only as copies), so this cap keeps an import within
-- 256 times its input; a longer conversation comes as LibreChat's flat
-- export (recursive off), which has no such cost and no cap.
CREATE OR REPLACE FUNCTION convo_private.max_librechat_nesting()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 256;

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
