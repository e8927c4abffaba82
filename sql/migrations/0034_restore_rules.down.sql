-- 0034_restore_rules down: reverses 0034_restore_rules.up.sql.

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

-- import_conversation: restores an export (export_conversation's document,
-- version 3, or version 2, read as version 3 with no title, not archived, no
-- changes and its latest message's time as its last activity) into this database: a DBA's operation, convo_admin's, for
-- moving or restoring a conversation between databases. The document is
-- accepted only when every row is one the API could have written: its
-- shape and times (restore_problem) before anything is written, its ledger
-- (ledger_problems) once the tree is in; anything else is CV011 naming the
-- key and the row, and nothing is written. Ids, times, reasons, states and
-- who-columns are kept as data; what the database assigns is assigned anew:
-- head-log and event seq are numbered here in the document's order (its
-- numbers kept beside, as source_seq), and a restored effect's scope key is
-- computed under this database's secret (its idempotency key, which may
-- have been sent, is kept). The restore is recorded in convo.imports (who:
-- the caller; when; the document's keyed digest), and every row it writes
-- names that record (import_id), so a restored row is told from one
-- written here. The tree goes in through write_messages, the rest as the
-- document has it, once checked. A repeat is a no-op returning the id; the
-- id with other content is CV009.
CREATE OR REPLACE FUNCTION convo.import_conversation(p_owner_id text, p_export jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
DECLARE
    v_keys      text[] := ARRAY['format', 'version', 'conversation', 'messages', 'head_log', 'changes', 'generations',
                                'tools', 'tool_calls', 'effects', 'effect_events', 'erasures', 'origins', 'imports'];
    -- What the database assigns, and so what a restore does not read back as given.
    v_assigned  constant text[] := ARRAY['seq', 'source_seq', 'import_id', 'scope_key', 'idempotency_key'];
    v_now       timestamptz := clock_timestamp();
    v_import    uuid := gen_random_uuid();
    v_key       text;
    v_conv      jsonb;
    v_id        uuid;
    v_digest    text;
    v_existing  convo.conversations;
    v_problem   text;
    v_ids       uuid[];
    v_parents   uuid[];
    v_roles     text[];
    v_parts     jsonb[];
    v_reasons   text[];
    v_times     timestamptz[];
    v_state     text;
    v_table     text;
    v_constraint text;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);

    -- The envelope: format, version, exactly the keys of its version.
    IF p_export IS NULL OR jsonb_typeof(p_export) <> 'object' THEN
        RAISE EXCEPTION 'p_export must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, p_export %s', p_owner_id, coalesce(jsonb_typeof(p_export), 'NULL'));
    END IF;
    IF p_export -> 'format' IS DISTINCT FROM '"pgconvo.export"' OR p_export -> 'version' NOT IN ('2', '3')
       OR p_export -> 'version' IS NULL THEN
        RAISE EXCEPTION 'not a pgconvo export of version 2 or 3'
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, format %s, version %s', p_owner_id,
                                  coalesce((p_export -> 'format')::text, 'missing'), coalesce((p_export -> 'version')::text, 'missing')),
                  HINT = CASE WHEN p_export -> 'version' = '1'
                              THEN 'Version 1 exports lack what a restore checks (the tool version of each call): migrate the source database and export again.'
                              ELSE 'import_conversation reads what export_conversation writes: {"format": "pgconvo.export", "version": 3, ...}.' END;
    END IF;
    IF p_export -> 'version' = '2' THEN
        v_keys := array_remove(v_keys, 'changes');
    END IF;
    FOREACH v_key IN ARRAY v_keys LOOP
        IF NOT p_export ? v_key THEN
            RAISE EXCEPTION 'the export has no key "%"', v_key
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, missing key %s', p_owner_id, v_key);
        END IF;
        IF jsonb_typeof(p_export -> v_key) <> (CASE v_key WHEN 'format' THEN 'string' WHEN 'version' THEN 'number'
                                                        WHEN 'conversation' THEN 'object' ELSE 'array' END) THEN
            RAISE EXCEPTION 'the export''s "%" is a JSON %', v_key, jsonb_typeof(p_export -> v_key)
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, key %s', p_owner_id, v_key);
        END IF;
    END LOOP;
    SELECT k INTO v_key FROM jsonb_object_keys(p_export) k WHERE k <> ALL (v_keys) ORDER BY k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the export has an unknown key "%"', v_key
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, unknown key %s', p_owner_id, v_key);
    END IF;
    v_conv := p_export -> 'conversation';
    IF jsonb_typeof(v_conv -> 'id') IS DISTINCT FROM 'string'
       OR v_conv ->> 'id' !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'the export''s conversation has no uuid "id"'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, key conversation.id', p_owner_id);
    END IF;
    v_id := (v_conv ->> 'id')::uuid;
    IF v_conv -> 'owner_id' IS DISTINCT FROM to_jsonb(p_owner_id) THEN
        RAISE EXCEPTION 'the export belongs to another owner'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, owner %s', v_id, p_owner_id);
    END IF;
    v_digest := convo_private.keyed_digest(encode(sha256(convert_to(p_export::text, 'UTF8')), 'hex'));

    BEGIN
        -- Version 2 had no title, archive state or change log: it is read
        -- as version 3 with none, its last activity its latest message's time.
        IF p_export -> 'version' = '2' THEN
            v_conv := v_conv || jsonb_build_object('title', NULL, 'archived', false, 'last_activity_at',
                (SELECT max(t) FROM (SELECT (v_conv ->> 'created_at')::timestamptz
                                     UNION ALL
                                     SELECT (e.elem ->> 'created_at')::timestamptz
                                       FROM jsonb_array_elements(p_export -> 'messages') AS e (elem)) AS x (t)));
            p_export := p_export || jsonb_build_object('version', 3, 'changes', '[]'::jsonb, 'conversation', v_conv);
            v_keys := array_append(v_keys, 'changes');
        END IF;
        IF jsonb_typeof(v_conv -> 'archived') IS DISTINCT FROM 'boolean' THEN
            RAISE EXCEPTION 'the export''s conversation has no boolean "archived"'
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, key conversation.archived', v_id);
        END IF;
        -- A repeat, recognised by the id before any other check, and read
        -- without a lock (another owner's row is never locked or waited
        -- for): the same document restored here before (its digest), or a
        -- conversation of this database that exports to exactly it, returns
        -- the id and writes nothing; anything else under that id is CV009.
        SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = v_id;
        IF FOUND THEN
            IF v_existing.owner_id = p_owner_id
               AND (EXISTS (SELECT 1 FROM convo.imports i
                             WHERE i.conversation_id = v_id AND i.format = 'pgconvo' AND i.import_id IS NULL
                               AND i.digest = v_digest)
                    OR convo_private.export_of(v_id)::text = p_export::text) THEN
                RETURN v_id;
            END IF;
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        IF octet_length((v_conv -> 'metadata')::text) > convo.max_metadata_bytes() THEN
            RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('conversation %s: %s bytes', v_id, octet_length((v_conv -> 'metadata')::text));
        END IF;

        -- A history this database could have written, or CV011 naming the
        -- first row that is not (restore_problem), before anything is written.
        v_problem := convo_private.restore_problem(p_owner_id, p_export, v_now);
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export is not a history the API could have written: %', v_problem
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, %s', v_id, v_problem);
        END IF;
        -- The tool versions its effects were checked against are this
        -- database's too: an import never adds to the allowlist (the DBA's).
        SELECT format('tool %s version %s', x.name, x.version) INTO v_problem
          FROM jsonb_array_elements(p_export -> 'tools') AS j (tool)
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tools, j.tool) AS x
          LEFT JOIN convo.tools t ON t.name = x.name AND t.version = x.version
         WHERE t.name IS NULL OR (to_jsonb(t) - 'registered_at' - 'registered_by')::text IS DISTINCT FROM j.tool::text
         LIMIT 1;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export''s % is not registered here with the same settings', v_problem
                USING ERRCODE = 'CV007', DETAIL = format('conversation %s, %s', v_id, v_problem),
                      HINT = 'Register the tool versions the export lists (convo.register_tool) before importing.';
        END IF;

        INSERT INTO convo.conversations (id, owner_id, metadata, created_at, title, archived, last_activity_at)
        VALUES (v_id, p_owner_id, v_conv -> 'metadata', (v_conv ->> 'created_at')::timestamptz, v_conv ->> 'title',
                (v_conv ->> 'archived')::boolean, (v_conv ->> 'last_activity_at')::timestamptz)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'conversation id % was taken meanwhile', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        -- The restore's record, and the document's own records of imports,
        -- kept as restored rows.
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
        VALUES (v_id, v_import, p_owner_id, 'pgconvo', NULL, v_digest);
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest, imported_by, imported_at, import_id)
        SELECT v_id, i.id, i.owner_id, i.format, i.source_key, i.digest, i.imported_by, i.imported_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.imports, p_export -> 'imports') i;

        -- Origins first (their foreign key to the message is deferred), then
        -- the tree through write_messages: parents first, siblings in order,
        -- with their times and the restore's record (so no ledger decision:
        -- the document's are restored below); the head does not move there,
        -- its log is the document's.
        INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
        SELECT v_id, o.message_id, o.source, o.node_key, o.node
          FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins') o;
        SELECT array_agg(m.id ORDER BY m.depth, m.sibling_index), array_agg(m.parent_id ORDER BY m.depth, m.sibling_index),
               array_agg(m.role ORDER BY m.depth, m.sibling_index), array_agg(m.parts ORDER BY m.depth, m.sibling_index),
               array_agg(m.branch_reason ORDER BY m.depth, m.sibling_index),
               array_agg(m.created_at ORDER BY m.depth, m.sibling_index)
          INTO v_ids, v_parents, v_roles, v_parts, v_reasons, v_times
          FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m;
        PERFORM convo_private.write_messages(v_id, NULL, v_ids, v_parents, v_roles, v_parts, v_reasons, v_times,
                                             v_import, NULL, NULL, NULL);

        -- The head log, numbered here from 1 in the document's order, the
        -- head where it ends, and the live path to it.
        INSERT INTO convo.conversation_head_log
            (conversation_id, seq, head_message_id, previous_head_id, moved_at, moved_by, reason, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY l.seq), l.head_message_id, l.previous_head_id, l.moved_at, l.moved_by,
               l.reason, l.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.conversation_head_log, p_export -> 'head_log') l;
        IF v_conv ->> 'head_message_id' IS NOT NULL THEN
            UPDATE convo.conversations c SET head_message_id = (v_conv ->> 'head_message_id')::uuid WHERE c.id = v_id;
            PERFORM convo_private.move_live_path(v_id, (v_conv ->> 'head_message_id')::uuid);
        END IF;
        -- The change log (title, archive state), numbered here the same way.
        INSERT INTO convo.conversation_changes
            (conversation_id, seq, field, old_value, new_value, changed_at, changed_by, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY x.seq), x.field, x.old_value, x.new_value, x.changed_at, x.changed_by,
               x.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.conversation_changes, p_export -> 'changes') x;

        -- Generations as they stand.
        INSERT INTO convo.generations
        SELECT r.* FROM jsonb_array_elements(p_export -> 'generations') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.generations,
                                             j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import)) r;

        -- The record of earlier erasures, recorded by this transaction
        -- (before the effects, whose key epochs count them).
        INSERT INTO convo.erasures (owner_id, id, conversation_id, reason, erased_by, erased_at, import_id)
        SELECT r.owner_id, r.id, v_id, r.reason, r.erased_by, r.erased_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.erasures, p_export -> 'erasures') r;
        INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
        SELECT j.elem ->> 'owner_id', (j.elem ->> 'id')::uuid, p.place, p.rows_redacted
          FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
               LATERAL jsonb_to_recordset(j.elem -> 'places') p (place text, rows_redacted bigint);

        -- Effects as they stand (their event chains were checked above). The
        -- scope key is computed here (scope_key, this database's secret)
        -- from the creating call's input, unless erasure left none, in the
        -- effect's key epoch (key_epoch: the document's erasures, written
        -- above, by its requested_at); the
        -- idempotency key is the document's, which may have been sent,
        -- except where nothing was sent (awaiting confirmation, rejected),
        -- where it is the scope key.
        INSERT INTO convo.tool_effects
        SELECT r.*
          FROM jsonb_array_elements(p_export -> 'effects') j (elem)
          LEFT JOIN (SELECT k.effect_id, k.decision,
                            convo_private.scope_key(CASE WHEN k.decision = 'rejected' THEN 'rejected' ELSE t.idempotency_scope END,
                                                    v_id, k.tool_call_id, k.fork_point_id, k.tool_name, m.parts -> k.ordinal -> 'input',
                                                    convo_private.key_epoch(v_id, e.requested_at))
                                AS scope_key
                       FROM jsonb_populate_recordset(NULL::convo.tool_effect_calls, p_export -> 'tool_calls') k
                       JOIN jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m ON m.id = k.message_id
                       JOIN convo.tools t ON t.name = k.tool_name AND t.version = k.tool_version
                       JOIN jsonb_populate_recordset(NULL::convo.tool_effects, p_export -> 'effects') e ON e.id = k.effect_id
                      WHERE k.decision IN ('execute', 'confirm', 'rejected')
                        AND (m.parts -> k.ordinal)::text <> convo_private.redact_part(m.parts -> k.ordinal)::text) q
            ON q.effect_id::text = j.elem ->> 'id'
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tool_effects,
              j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import,
                                           'scope_key', coalesce(to_jsonb(q.scope_key), j.elem -> 'scope_key'))
                    || CASE WHEN j.elem ->> 'state' = 'awaiting_confirmation' OR q.decision = 'rejected'
                            THEN jsonb_build_object('idempotency_key', coalesce(to_jsonb(q.scope_key), j.elem -> 'scope_key'))
                            ELSE '{}' END) r;

        INSERT INTO convo.tool_effect_calls
        SELECT r.* FROM jsonb_array_elements(p_export -> 'tool_calls') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.tool_effect_calls,
                                             j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import)) r;
        -- The event log, numbered here from 1 in the document's order.
        INSERT INTO convo.tool_effect_events
            (conversation_id, seq, effect_id, from_state, to_state, actor, evidence, at, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY v.seq), v.effect_id, v.from_state, v.to_state, v.actor, v.evidence, v.at,
               v.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v;

        -- The ledger is one the API could have written (ledger_problems):
        -- decisions that follow from the tool versions, links within a
        -- scope, amounts from the arguments.
        SELECT p.row_name || ': ' || p.problem INTO v_problem FROM convo_private.ledger_problems(v_id) p
         ORDER BY p.row_name, p.problem LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the export is not a history the API could have written: %', v_problem
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, %s', v_id, v_problem);
        END IF;

        -- What is stored exports back to the input but for what the
        -- database assigned (v_assigned; an idempotency key is kept or is
        -- the new scope key, as above) and the restore's own record: no key
        -- ignored, no value changed (a derived column, a time, a number's
        -- text).
        SELECT k INTO v_key
          FROM (SELECT convo_private.export_of(v_id) AS stored) s, unnest(v_keys) k
         WHERE (SELECT coalesce(jsonb_agg(r.elem - v_assigned ORDER BY r.n), '[]')
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(s.stored -> k) = 'array' THEN s.stored -> k END)
                       WITH ORDINALITY r (elem, n)
                 WHERE NOT (k = 'imports' AND r.elem ->> 'id' = v_import::text))::text
               IS DISTINCT FROM
               (SELECT coalesce(jsonb_agg(r.elem - v_assigned ORDER BY r.n), '[]')
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_export -> k) = 'array' THEN p_export -> k END)
                       WITH ORDINALITY r (elem, n))::text
            OR (jsonb_typeof(p_export -> k) <> 'array' AND (s.stored -> k)::text IS DISTINCT FROM (p_export -> k)::text)
         ORDER BY array_position(v_keys, k) LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the export does not read back identically: its "%" differs from what it stores', v_key
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, key %s', v_id, v_key),
                      HINT = 'Import exactly what export_conversation wrote: rows with all their columns, as it spells them.';
        END IF;
    EXCEPTION
        WHEN integrity_constraint_violation OR data_exception THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_table = TABLE_NAME, v_constraint = CONSTRAINT_NAME;
            RAISE EXCEPTION 'the export is not well formed'
                USING ERRCODE = 'CV011',
                      DETAIL = format('conversation %s, SQLSTATE %s, table %s, constraint %s', v_id, v_state,
                                      coalesce(nullif(v_table, ''), 'none'), coalesce(nullif(v_constraint, ''), 'none'));
    END;

    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.import_conversation(text, jsonb) IS
    'Restores an export_conversation document for its owner (convo_admin): only a history the API could have written (CV011 otherwise), seq numbered here, recorded in convo.imports and marked on every row; a repeat returns the id, other content under the id is CV009.';

-- move_head: a branch switch: the head names any message of the conversation,
-- moved through write_messages (no new message). p_reason is free text in
-- lower snake case; 'create' and 'direct_update' are kept for the
-- database's own log rows. Moving to where the head is writes nothing.
CREATE OR REPLACE FUNCTION convo.move_head(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_reason          text DEFAULT 'switch',
    p_expected_head   uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_reason IS NULL OR p_reason !~ '^[a-z][a-z0-9_]{0,62}$' OR p_reason IN ('create', 'direct_update') THEN
        RAISE EXCEPTION 'invalid head-move reason %', coalesce(quote_literal(p_reason), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id),
                  HINT = 'A reason is 1 to 63 characters of a-z, 0-9 and _, starting with a letter; create and direct_update are reserved.';
    END IF;
    v_head := convo_private.lock_conversation(p_conversation_id);
    PERFORM convo_private.message_ref(p_conversation_id, p_message_id);
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                         p_message_id, p_reason, p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';

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

-- write_messages: the one write path of the tree. Every call that adds
-- messages writes through it (append_message, edit_and_resend and
-- regenerate, complete_generation, create_conversation, the imports), once
-- its caller has checked the owner and locked the conversation
-- (lock_conversation; p_old_head is the head it read). Everything comes in
-- as arguments, nothing through a setting or a marker:
--   the new messages as parallel arrays, parents first: each parent an
--   existing message, an earlier new one, or NULL (a root); a branch reason
--   asked for (NULL: the tree's, 'branch' for a later child); a time (NULL:
--   now); the import writing them (NULL: none), which keeps their times and
--   writes no ledger row;
--   the head to move to, why and by whom (p_head NULL: the head stays).
-- It reads each existing parent once and computes depth, sibling position
-- and branch (a first child continues its parent's branch, a later sibling
-- starts one); checks every part against its message (part_problem), each
-- tool call id unique in the conversation and each result naming a call of
-- its parent; inserts the messages and their keyed parts (keyed_parts:
-- calls, results, attachments) as sets; records each tool call's ledger
-- decision (record_tool_call); and moves the head, with the conversation's
-- last activity (log_head_move: the head log, the live path, the
-- notification). The tables' triggers only guard
-- writes that do not come from pgconvo's own code. DETAILs name where a
-- refused message was going, never its own id, which is not stored.
CREATE OR REPLACE FUNCTION convo_private.write_messages(
    p_conversation_id uuid,
    p_old_head        uuid,
    p_ids             uuid[],
    p_parents         uuid[],
    p_roles           text[],
    p_parts           jsonb[],
    p_reasons         text[],
    p_times           timestamptz[],
    p_import_id       uuid,
    p_head            uuid,
    p_head_reason     text,
    p_moved_by        text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Its statements are shaped by the arrays, not their values: a plan made
-- for one call serves every call (PostgreSQL would otherwise plan them anew
-- each time, at a cost above the statements').
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n       int := coalesce(cardinality(p_ids), 0);
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
    v_linked  boolean; -- calls or results
    v_calls   boolean; -- calls
    v_call    record;
BEGIN
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
                  FROM unnest(p_ids, p_parents) WITH ORDINALITY AS n (id, parent_id, i)
                  LEFT JOIN unnest(p_ids) WITH ORDINALITY AS b (id, i) ON b.id = n.parent_id AND b.i < n.i
                  LEFT JOIN convo.messages p
                         ON b.i IS NULL AND p.conversation_id = p_conversation_id AND p.id = n.parent_id) x;
        IF v_missing IS NOT NULL THEN
            PERFORM convo_private.raise_not_found('message', p_parents[v_missing]::text, p_conversation_id,
                (SELECT m.conversation_id FROM convo.messages m WHERE m.id = p_parents[v_missing] LIMIT 1));
        END IF;
        FOR i IN 1 .. v_n LOOP
            IF v_pidx[i] > 0 THEN
                v_depth[i] := v_depth[v_pidx[i]] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_branch[v_pidx[i]] ELSE p_ids[i] END;
            ELSIF p_parents[i] IS NULL THEN
                v_depth[i] := 0;
                v_branch[i] := p_ids[i];
            ELSE
                v_depth[i] := v_pdepth[i] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_pbranch[i] ELSE p_ids[i] END;
            END IF;
            v_reason[i] := CASE WHEN v_sib[i] > 1 THEN coalesce(p_reasons[i], 'branch') END;
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
                  FROM unnest(p_roles, p_parts, p_reasons) WITH ORDINALITY AS m (role, parts, reason, i)
                UNION ALL
                SELECT m.i, e.n::int, e.part ->> 'type', convo_private.part_problem(e.part, m.role)
                  FROM unnest(p_roles, p_parts) WITH ORDINALITY AS m (role, parts, i),
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
              FROM unnest(p_parts) WITH ORDINALITY AS m (parts, i),
                   jsonb_array_elements(m.parts) AS e (part)
             WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use' AND e.part ->> 'id' IS NOT NULL;
            SELECT x.i, x.ordinal, x.problem INTO v_link_i, v_link_ordinal, v_link_problem FROM (
                SELECT c.i, c.n::int AS ordinal,
                       ARRAY['CV008', format('tool call id %s is already used in this conversation', c.id),
                             format(', tool call %s', c.id), ''] AS problem
                  FROM (SELECT m.i, e.n, e.part ->> 'id' AS id,
                               count(*) OVER (PARTITION BY e.part ->> 'id' ORDER BY m.i, e.n) AS nth
                          FROM unnest(p_parts) WITH ORDINALITY AS m (parts, i),
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
                          FROM unnest(p_parts, p_parents) WITH ORDINALITY AS m (parts, parent_id, i),
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
                      DETAIL = format('a new %s message in conversation %s, parent %s', coalesce(p_roles[v_bad_i], 'NULL'),
                                      p_conversation_id, coalesce(p_parents[v_bad_i]::text, 'none (a root)'))
                               || CASE WHEN v_bad_ordinal > 0 THEN format(', part %s', v_bad_ordinal - 1) ELSE '' END
                               || v_problem[3];
        END IF;

        INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, depth, sibling_index, branch_id,
                                    parts, created_at, import_id)
        SELECT p_conversation_id, x.id, x.parent_id, x.role, x.reason, x.depth, x.sib, x.branch, x.parts,
               coalesce(x.at, v_now), p_import_id
          FROM unnest(p_ids, p_parents, p_roles, v_reason, v_depth, v_sib, v_branch, p_parts, p_times)
               WITH ORDINALITY AS x (id, parent_id, role, reason, depth, sib, branch, parts, at, i)
         ORDER BY x.i;

        -- The parts addressed by key, one row each; the rest live only in
        -- the message's own array.
        IF v_keyed THEN
            INSERT INTO convo.keyed_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name)
            SELECT p_conversation_id, m.id, (e.n - 1)::int, e.part ->> 'type',
                   CASE e.part ->> 'type' WHEN 'tool_use' THEN e.part ->> 'id' WHEN 'tool_result' THEN e.part ->> 'tool_use_id' END,
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END
              FROM unnest(p_ids, p_parts) AS m (id, parts),
                   jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
             WHERE e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment');
        END IF;
        -- Each tool call's ledger decision, before any request can leave;
        -- an import's calls happened elsewhere and get none.
        IF v_calls AND p_import_id IS NULL THEN
            FOR v_call IN
                SELECT m.id, (e.n - 1)::int AS ordinal, e.part
                  FROM unnest(p_ids, p_parts) WITH ORDINALITY AS m (id, parts, i),
                       jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                 WHERE e.part ->> 'type' = 'tool_use'
                 ORDER BY m.i, e.n
            LOOP
                PERFORM convo_private.record_tool_call(p_conversation_id, v_call.id, v_call.ordinal,
                                                       v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input');
            END LOOP;
        END IF;
    END IF;

    IF p_head IS NOT NULL AND p_head IS DISTINCT FROM p_old_head THEN
        -- The conversation's last activity moves with its head: now, or for
        -- an import the latest original time it writes.
        UPDATE convo.conversations c
           SET head_message_id = p_head,
               last_activity_at = CASE WHEN p_import_id IS NULL OR p_times IS NULL THEN v_now
                                       ELSE coalesce((SELECT max(t) FROM unnest(p_times) AS t), v_now) END
         WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_head_move(p_conversation_id, p_head, p_old_head, p_head_reason, p_moved_by, p_import_id);
    END IF;
END;
$$;

SELECT convo_private.apply_grants();

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
