-- 0035_restore_call_and_deadline: a restored call's ordinal counts from 0
-- (jsonb's -> counted a negative one from the end, and the insert failed
-- naming no row), an effect's deadline is its tool's after its request or
-- confirmation, and a scope key taken twice or a value its column's type
-- refuses names its row.

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
-- document has it, once checked. A repeat is a no-op returning the id,
-- also when it waited for the first to commit (a retry); the id with other
-- content is CV009.
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
    v_stored    jsonb;
    v_ids       uuid[];
    v_parents   uuid[];
    v_roles     text[];
    v_parts     jsonb[];
    v_reasons   text[];
    v_times     timestamptz[];
    v_state     text;
    v_table     text;
    v_constraint text;
    v_column    text;
    v_message   text;
    v_detail    text;
    v_check     text;
    v_row       text;
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
            -- The insert waited for another session's restore under this
            -- id, now committed: a retry of the same document (its digest
            -- on record) is a repeat, as above, and writes nothing.
            IF EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = v_id AND c.owner_id = p_owner_id)
               AND (EXISTS (SELECT 1 FROM convo.imports i
                             WHERE i.conversation_id = v_id AND i.format = 'pgconvo' AND i.import_id IS NULL
                               AND i.digest = v_digest)
                    OR convo_private.export_of(v_id)::text = p_export::text) THEN
                RETURN v_id;
            END IF;
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
            -- Which row (by its place and id, seq or key in the document)
            -- and which of its fields, so that a large document's fault is
            -- found: one pass over the key's rows.
            v_stored := convo_private.export_of(v_id);
            SELECT format('row %s of the array%s, field %s', x.n, coalesce(' (' || x.name || ')', ''), coalesce(x.field, 'the row'))
              INTO v_problem
              FROM (SELECT coalesce(g.n, s.n) AS n,
                           coalesce('id ' || (g.raw ->> 'id'), 'seq ' || (g.raw ->> 'seq'), 'call ' || (g.raw ->> 'tool_call_id'),
                                    'message ' || (g.raw ->> 'message_id'), 'tool ' || (g.raw ->> 'name')) AS name,
                           (SELECT f.k FROM (SELECT jsonb_object_keys(g.elem) UNION SELECT jsonb_object_keys(s.elem)) f (k)
                             WHERE (g.elem -> f.k)::text IS DISTINCT FROM (s.elem -> f.k)::text ORDER BY f.k LIMIT 1) AS field
                      FROM (SELECT r.elem AS raw, r.elem - v_assigned AS elem, r.n
                              FROM jsonb_array_elements(p_export -> v_key) WITH ORDINALITY r (elem, n)) g
                      FULL JOIN (SELECT r.elem - v_assigned AS elem, row_number() OVER (ORDER BY r.n) AS n
                                   FROM jsonb_array_elements(v_stored -> v_key) WITH ORDINALITY r (elem, n)
                                  WHERE NOT (v_key = 'imports' AND r.elem ->> 'id' = v_import::text)) s ON s.n = g.n
                     WHERE g.elem::text IS DISTINCT FROM s.elem::text
                     ORDER BY 1 LIMIT 1) x
             WHERE jsonb_typeof(p_export -> v_key) = 'array';
            IF jsonb_typeof(p_export -> v_key) = 'object' THEN
                SELECT format('field %s', f.k) INTO v_problem
                  FROM (SELECT jsonb_object_keys(p_export -> v_key)
                        UNION SELECT jsonb_object_keys(v_stored -> v_key)) f (k)
                 WHERE (p_export -> v_key -> f.k)::text IS DISTINCT FROM (v_stored -> v_key -> f.k)::text
                 ORDER BY f.k LIMIT 1;
            END IF;
            RAISE EXCEPTION 'the export does not read back identically: its "%" differs from what it stores', v_key
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, key %s%s', v_id, v_key, coalesce(', ' || v_problem, '')),
                      HINT = 'Import exactly what export_conversation wrote: rows with all their columns, as it spells them.';
        END IF;
    EXCEPTION
        WHEN integrity_constraint_violation OR data_exception THEN
            -- The column and the server's message too: a NULL or a cast
            -- that fails names its column and value there.
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_table = TABLE_NAME, v_constraint = CONSTRAINT_NAME,
                                    v_column = COLUMN_NAME, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
            -- The row: a CHECK or NOT NULL that failed is read again over
            -- the document's rows of that table (one pass, on this path
            -- only), and the first row it refuses is named by its place and
            -- its id, seq or key. The table and the rule come from the
            -- catalog, never from the document.
            v_key := CASE v_table WHEN 'messages' THEN 'messages' WHEN 'conversation_head_log' THEN 'head_log'
                                  WHEN 'conversation_changes' THEN 'changes' WHEN 'generations' THEN 'generations'
                                  WHEN 'tool_effect_calls' THEN 'tool_calls' WHEN 'tool_effects' THEN 'effects'
                                  WHEN 'tool_effect_events' THEN 'effect_events' WHEN 'erasures' THEN 'erasures'
                                  WHEN 'import_origins' THEN 'origins' WHEN 'imports' THEN 'imports' END;
            v_check := CASE WHEN v_state = '23502' AND nullif(v_column, '') IS NOT NULL THEN format('%I IS NOT NULL', v_column)
                            WHEN v_state = '23514' THEN
                                (SELECT regexp_replace(pg_get_constraintdef(c.oid), '^CHECK \((.*)\)( NOT VALID)?$', '\1')
                                   FROM pg_constraint c
                                  WHERE c.conrelid = format('convo.%I', v_table)::regclass AND c.conname = v_constraint AND c.contype = 'c') END;
            -- A scope key computed here that another effect of the document
            -- already holds (its key epoch, the erasures before it, differs
            -- from the one the document's erasures give): the effect that
            -- holds it is named, by the key the server reports.
            IF v_state = '23505' AND v_table = 'tool_effects' THEN
                SELECT format(', effects row %s of the array (id %s) holds the scope key another effect of the export '
                              'takes in the key epoch its erasures give', j.n, j.elem ->> 'id')
                  INTO v_row
                  FROM jsonb_array_elements(p_export -> 'effects') WITH ORDINALITY j (elem, n)
                 WHERE strpos(v_detail, j.elem ->> 'scope_key') > 0
                 ORDER BY j.n LIMIT 1;
            END IF;
            IF v_key IS NOT NULL AND v_check IS NOT NULL AND jsonb_typeof(p_export -> v_key) = 'array' THEN
              BEGIN
                EXECUTE format('SELECT format(%L, j.n, coalesce(%L || (j.elem ->> %L), %L || (j.elem ->> %L), %L || (j.elem ->> %L), %L || (j.elem ->> %L), %L))
                                  FROM jsonb_array_elements($1) WITH ORDINALITY j (elem, n),
                                       LATERAL jsonb_populate_record(NULL::convo.%I, j.elem) r
                                 WHERE (%s) IS NOT TRUE
                                 ORDER BY j.n LIMIT 1',
                               ', ' || v_key || ' row %s of the array (%s)', 'id ', 'id', 'seq ', 'seq', 'call ', 'tool_call_id',
                               'message ', 'message_id', 'no id', v_table,
                               CASE WHEN v_state = '23502' THEN v_check ELSE format('(%s) IS NOT FALSE', v_check) END)
                   INTO v_row USING p_export -> v_key;
              EXCEPTION WHEN OTHERS THEN
                v_row := NULL; -- a row that cannot be read again is not named
              END;
            END IF;
            IF v_row IS NULL AND v_state LIKE '22%' THEN
                v_row := convo_private.unreadable_row(p_export);
            END IF;
            RAISE EXCEPTION 'the export is not well formed'
                USING ERRCODE = 'CV011',
                      DETAIL = format('conversation %s%s, SQLSTATE %s, table %s, constraint %s, column %s: %s', v_id, coalesce(v_row, ''), v_state,
                                      coalesce(nullif(v_table, ''), 'none'), coalesce(nullif(v_constraint, ''), 'none'),
                                      coalesce(nullif(v_column, ''), 'none'), left(v_message, 200));
    END;

    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.import_conversation(text, jsonb) IS
    'Restores an export_conversation document for its owner (convo_admin): only a history the API could have written (CV011 otherwise), seq numbered here, recorded in convo.imports and marked on every row; a repeat returns the id, other content under the id is CV009.';

-- restore_problem: the first reason, naming the key and the row, why an
-- export document is not a history this database could have written, or
-- NULL. import_conversation refuses the document with it (CV011) before
-- writing anything; what needs the stored tree (the ledger's decisions,
-- links and amounts) is ledger_problems', after. In one pass each:
--   references: every id the document names is in it, and the chains hold
--   (parents, depths, the head log ending at the head, effects' events from
--   'requested' to their state, each effect created by one call); an
--   origin's format has an import in the document's record of imports;
--   numbers: a head-log, change or event seq is there and appears once
--   (import_conversation renumbers them, keeping their order);
--   reasons: the head log's are the API's ('direct_update' is never
--   restored; 'create' and 'import' only begin a log, 'import' with an
--   import from another product in the document);
--   keys: an effect's idempotency key is its scope key, the re-run key of
--   its confirmation, or (sent before digests were keyed) a plain digest of
--   its scope;
--   generations: a completed one's message is an assistant answer to its
--   prompt (the generations guard's rule for a direct write);
--   times: each is there and finite; in order: nothing after p_now or
--   before the conversation, the last activity not before it, a head
--   move not before its message, events of an effect in order and not
--   before it, an effect not before its call nor confirmed, settled or
--   compensated before it was requested, a call not before its
--   message, a generation not before its prompt nor ending before it began;
--   a message not before its parent unless it came from another product
--   (an origin), whose times are the source's, but not after the import of
--   its format;
--   erasures: one is restored only where every copy of the content from
--   before it is redacted (the earliest unredacted row of each kind against
--   the first erasure after it: linear), each place is one erasure writes,
--   and no count is more than the rows there; an erased attachment is
--   under an erasure;
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
         -- Messages that came from another product keep the source's times
         -- (but none after the import of their format): their origin's
         -- format and the latest import of it in the document.
         io AS (SELECT i.format, max(i.imported_at) AS imported_at FROM i GROUP BY i.format),
         mo AS (SELECT m.*, x.source, x.message_id IS NOT NULL AS imported, io.imported_at AS source_imported_at
                  FROM m
                  LEFT JOIN (SELECT DISTINCT ON (o.message_id) o.message_id, o.source FROM o ORDER BY o.message_id) x
                    ON x.message_id = m.id
                  LEFT JOIN io ON io.format = x.source),
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
        -- Numbers: each row of a numbered log has its seq (its order).
        (SELECT format('%s: row %s of the array has no seq', x.key, x.n)
           FROM (SELECT k.key, j.n FROM unnest(ARRAY['head_log', 'changes', 'effect_events']) k (key),
                        jsonb_array_elements(p_export -> k.key) WITH ORDINALITY j (elem, n)
                  WHERE jsonb_typeof(j.elem -> 'seq') IS DISTINCT FROM 'number') x LIMIT 1)
        UNION ALL
        -- References.
        (SELECT format('messages: message %s appears twice', m.id) FROM m GROUP BY m.id HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        -- Each row of the other keys once, by its key, named before an
        -- insert would fail on it.
        (SELECT format('%s: %s appears twice', x.key, x.name)
           FROM (SELECT 'generations' AS key, 'generation ' || g.id AS name FROM g
                 UNION ALL SELECT 'tool_calls', 'call ' || k.tool_call_id FROM k
                 UNION ALL SELECT 'effects', 'effect ' || e.id FROM e
                 UNION ALL SELECT 'erasures', 'erasure ' || r.id FROM r
                 UNION ALL SELECT 'imports', 'import ' || i.id FROM i
                 UNION ALL SELECT 'tools', format('tool %s version %s', t.name, t.version) FROM t) x
          GROUP BY x.key, x.name HAVING count(*) > 1 LIMIT 1)
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
        -- Siblings numbered from 1 in order, a branch reason on every one
        -- but the first (write_messages places them so), named here by id.
        (SELECT format('messages: message %s has sibling_index %s and branch_reason %s, its place among its siblings is %s', x.id,
                       coalesce(x.sibling_index::text, 'none'), coalesce(x.branch_reason, 'none'), x.place)
           FROM (SELECT m.id, m.sibling_index, m.branch_reason,
                        row_number() OVER (PARTITION BY m.parent_id ORDER BY m.sibling_index) AS place FROM m) x
          WHERE x.sibling_index IS DISTINCT FROM x.place OR (x.place = 1) <> (x.branch_reason IS NULL) LIMIT 1)
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
        -- A call links the tool_use part of its message at its ordinal (its
        -- id, and its effect's tool), as self_check's effects_linked requires;
        -- an ordinal counts from 0 (jsonb's -> would count a negative one
        -- from the end).
        (SELECT format('tool_calls: call %s links part %s of message %s, which is not its tool_use', k.tool_call_id, k.ordinal, k.message_id)
           FROM k JOIN m ON m.id = k.message_id
           LEFT JOIN e ON e.id = k.effect_id
          WHERE k.ordinal IS NULL OR k.ordinal < 0
             OR (CASE WHEN jsonb_typeof(m.parts) = 'array' THEN m.parts -> k.ordinal END) ->> 'type' IS DISTINCT FROM 'tool_use'
             OR m.parts -> k.ordinal ->> 'id' IS DISTINCT FROM k.tool_call_id
             OR (e.id IS NOT NULL AND m.parts -> k.ordinal ->> 'name' IS DISTINCT FROM e.tool_name) LIMIT 1)
        UNION ALL
        -- Every effect was created by exactly one call (execute, confirm or
        -- rejected), as self_check's effects_linked requires.
        (SELECT format('effects: effect %s has %s creating calls in the export, not one', x.id, x.n)
           FROM (SELECT e.id, count(k.tool_call_id) AS n
                   FROM e LEFT JOIN k ON k.effect_id = e.id AND k.decision IS DISTINCT FROM 'reuse'
                  GROUP BY e.id) x
          WHERE x.n <> 1 LIMIT 1)
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
        -- An origin is written by an import of its format, which the
        -- document's record of imports holds.
        (SELECT format('origins: the origin of message %s is of format %s, and the export has no import of format %s',
                       o.message_id, coalesce(o.source, 'none'), coalesce(o.source, 'none'))
           FROM o WHERE o.source IS NULL OR o.source = 'pgconvo' OR NOT EXISTS (SELECT 1 FROM io WHERE io.format = o.source) LIMIT 1)
        UNION ALL
        -- And the message it is the origin of was written by that import
        -- (its import_id names it), or carried by a restore that names it.
        (SELECT format('origins: the origin of message %s is of format %s, but the message names import %s, not one of that format',
                       m.id, m.source, coalesce(m.import_id::text, 'none'))
           FROM mo m LEFT JOIN i ON i.id = m.import_id
          WHERE m.imported AND (i.id IS NULL OR i.format NOT IN (m.source, 'pgconvo')) LIMIT 1)
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
        -- A log begun by an import is begun by one of the document's
        -- imports from another product (as an origin is written by one).
        (SELECT format('head_log: row seq %s has reason import, and the export has no import from another product', x.seq)
           FROM (SELECT l.seq, l.reason FROM l ORDER BY l.seq LIMIT 1) x
          WHERE x.reason = 'import' AND NOT EXISTS (SELECT 1 FROM io WHERE io.format IN ('chatgpt', 'openwebui', 'librechat')))
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
        -- Times: each one the database writes is there and finite (a
        -- column that may be NULL is finite when set), then in order.
        (SELECT format('%s: %s%s %s, not a finite time', x.key, x.row_name, x.col, coalesce(x.at::text, 'none'))
           FROM (SELECT 'conversation' AS key, '' AS row_name, 'created_at' AS col, v_created AS at, true AS required
                 UNION ALL
                 SELECT 'conversation', '', 'last_activity_at', (v_conv ->> 'last_activity_at')::timestamptz, true
                 UNION ALL
                 SELECT 'messages', format('message %s ', m.id), 'created_at', m.created_at, true FROM m
                 UNION ALL
                 SELECT 'head_log', format('row seq %s ', l.seq), 'moved_at', l.moved_at, true FROM l
                 UNION ALL
                 SELECT 'changes', format('row seq %s ', ch.seq), 'changed_at', ch.changed_at, true FROM ch
                 UNION ALL
                 SELECT 'generations', format('generation %s ', g.id), c.col, c.at, c.required
                   FROM g, LATERAL (VALUES ('started_at', g.started_at, true), ('finished_at', g.finished_at, false)) c (col, at, required)
                 UNION ALL
                 SELECT 'tool_calls', format('call %s ', k.tool_call_id), 'decided_at', k.decided_at, true FROM k
                 UNION ALL
                 SELECT 'effects', format('effect %s ', e.id), c.col, c.at, c.required
                   FROM e, LATERAL (VALUES ('requested_at', e.requested_at, true), ('deadline_at', e.deadline_at, true),
                                           ('confirmed_at', e.confirmed_at, false), ('settled_at', e.settled_at, false),
                                           ('compensated_at', e.compensated_at, false)) c (col, at, required)
                 UNION ALL
                 SELECT 'effect_events', format('event seq %s ', v.seq), 'at', v.at, true FROM v
                 UNION ALL
                 SELECT 'erasures', format('erasure %s ', r.id), 'erased_at', r.erased_at, true FROM r
                 UNION ALL
                 SELECT 'imports', format('import %s ', i.id), 'imported_at', i.imported_at, true FROM i) x
          WHERE (x.at IS NULL AND x.required) OR NOT isfinite(x.at) LIMIT 1)
        UNION ALL
        (SELECT format('conversation: created_at %s is after the import', v_created) WHERE v_created > p_now)
        UNION ALL
        (SELECT format('conversation: last activity at %s, before the conversation (%s)', v_conv ->> 'last_activity_at', v_created)
          WHERE (v_conv ->> 'last_activity_at')::timestamptz < v_created)
        UNION ALL
        -- A message from another product may be older than the conversation
        -- or its parent (the source's times), but none is after the import.
        (SELECT format('messages: message %s created at %s, %s', m.id, m.created_at,
                       CASE WHEN m.created_at > p_now OR m.imported THEN 'after the import' ELSE 'before the conversation' END)
           FROM mo m
          WHERE m.created_at > p_now OR (NOT m.imported AND m.created_at < v_created)
             OR (m.imported AND m.created_at > m.source_imported_at) LIMIT 1)
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
        -- A completed generation's message is an assistant answer to its
        -- prompt, as the generations guard requires of a direct write.
        (SELECT format('generations: generation %s is completed by message %s, not an assistant answer to its prompt %s',
                       g.id, g.message_id, g.prompt_message_id)
           FROM g LEFT JOIN m ON m.id = g.message_id
          WHERE g.state = 'completed'
            AND (m.id IS NULL OR m.parent_id IS DISTINCT FROM g.prompt_message_id OR m.role IS DISTINCT FROM 'assistant') LIMIT 1)
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
        (SELECT format('effects: effect %s %s at %s, %s', e.id, c.what, c.at,
                       CASE WHEN c.at > p_now THEN 'after the import' ELSE 'before it was requested' END)
           FROM e, LATERAL (VALUES ('confirmed', e.confirmed_at), ('settled', e.settled_at), ('compensated', e.compensated_at)) c (what, at)
          WHERE c.at > p_now OR c.at < e.requested_at LIMIT 1)
        UNION ALL
        -- The API sets confirmed_at, settled_at and compensated_at just
        -- before the event that records the change: each lies between that
        -- event and the one before it (or the request).
        (SELECT format('effects: effect %s %s at %s, not between event seq %s (%s) and the one before it (%s)',
                       x.effect_id, x.what, x.stamp, x.seq, x.at, x.before)
           FROM (SELECT w.effect_id, w.seq, w.at, w.before, c.what, c.stamp
                   FROM (SELECT v.effect_id, v.seq, v.at, v.from_state, v.to_state,
                                coalesce(lag(v.at) OVER (PARTITION BY v.effect_id ORDER BY v.seq), e.requested_at) AS before,
                                row_number() OVER (PARTITION BY v.effect_id, v.to_state IN ('applied', 'failed') ORDER BY v.seq) AS nth,
                                e.confirmed_at, e.settled_at, e.compensated_at
                           FROM v JOIN e ON e.id = v.effect_id) w
                  CROSS JOIN LATERAL (VALUES
                        ('confirmed', w.confirmed_at, w.from_state = 'awaiting_confirmation' AND w.to_state = 'pending'),
                        ('settled', w.settled_at, w.to_state IN ('applied', 'failed') AND w.nth = 1),
                        ('compensated', w.compensated_at, w.to_state = 'compensated')) c (what, stamp, this)
                  WHERE c.this AND c.stamp IS NOT NULL AND (c.stamp > w.at OR c.stamp < w.before)) x LIMIT 1)
        UNION ALL
        -- Its deadline is its tool's after its request, or after the
        -- confirmation that sent it again (record_tool_call, confirm_effect).
        -- The API adds the interval in the writer's time zone: exact for
        -- hours, minutes and seconds, and a day or month may move by a
        -- daylight-saving change, at most two hours.
        (SELECT format('effects: effect %s has deadline %s, not its tool''s deadline %s after %s', e.id, e.deadline_at,
                       t.deadline, coalesce(e.confirmed_at, e.requested_at))
           FROM e JOIN t ON t.name = e.tool_name AND t.version = e.tool_version
          WHERE e.deadline_at IS DISTINCT FROM coalesce(e.confirmed_at, e.requested_at) + t.deadline
            AND NOT ((date_part('day', t.deadline) <> 0 OR date_part('month', t.deadline) <> 0
                      OR date_part('year', t.deadline) <> 0)
                     AND e.deadline_at BETWEEN coalesce(e.confirmed_at, e.requested_at) + t.deadline - interval '2 hours'
                                           AND coalesce(e.confirmed_at, e.requested_at) + t.deadline + interval '2 hours')
          LIMIT 1)
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
        (SELECT format('changes: the log leaves the %s %s (%s), the conversation holds %s', f.field, coalesce(f.logged, 'none'),
                       coalesce('row seq ' || f.seq, 'no row'), coalesce(f.held, 'none'))
           FROM (SELECT 'title' AS field, v_conv ->> 'title' AS held, x.new_value AS logged, x.seq
                   FROM (SELECT NULL) one
                   LEFT JOIN (SELECT ch.new_value, ch.seq FROM ch WHERE ch.field = 'title' ORDER BY ch.seq DESC LIMIT 1) x ON true
                 UNION ALL
                 SELECT 'archived', v_conv ->> 'archived', coalesce(x.new_value, 'false'), x.seq
                   FROM (SELECT NULL) one
                   LEFT JOIN (SELECT ch.new_value, ch.seq FROM ch WHERE ch.field = 'archived' ORDER BY ch.seq DESC LIMIT 1) x ON true) f
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
        -- Each copy of content is a row with a time: every erasure at or
        -- after it must have redacted it. So the row of each kind with the
        -- earliest time that is not redacted is the one to name, against
        -- the first erasure at or after it; the places are each erasure's
        -- own. One pass over the rows of each kind and one over the
        -- erasures per kind: linear in the document, not erasures x rows.
        -- An erased attachment (its uri emptied, which no write but
        -- erasure leaves) is under an erasure of the document.
        (SELECT format('messages: message %s holds an erased attachment (part %s), and no erasure of the export is after it',
                       m.id, p.n - 1)
           FROM m CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(m.parts) = 'array' THEN m.parts ELSE '[]' END)
                WITH ORDINALITY p (part, n)
          WHERE p.part ->> 'type' = 'attachment' AND p.part ->> 'uri' = ''
            AND m.created_at > coalesce((SELECT max(r.erased_at) FROM r), '-infinity') LIMIT 1)
        UNION ALL
        (SELECT format('erasures: erasure %s, but %s', x.id, x.what)
           FROM (SELECT f.id, f.erased_at, u.what
                   FROM (SELECT DISTINCT ON (u.kind) u.kind, u.since, u.what
                           FROM (SELECT 'messages' AS kind, m.created_at AS since,
                                        format('message %s, created before it, is not redacted', m.id) AS what
                                   FROM m WHERE m.parts::text IS DISTINCT FROM (convo_private.redact_row('messages', to_jsonb(m)) -> 'parts')::text
                                 UNION ALL
                                 SELECT 'metadata', '-infinity', 'the conversation''s metadata is not redacted'
                                  WHERE v_conv -> 'metadata' IS DISTINCT FROM '{}'::jsonb
                                 UNION ALL
                                 SELECT 'changes', ch.changed_at, format('change seq %s, before it, holds a title', ch.seq)
                                   FROM ch WHERE ch.field = 'title' AND (ch.old_value IS NOT NULL OR ch.new_value IS NOT NULL)
                                 UNION ALL
                                 -- The title stands for every erasure after its last change.
                                 SELECT 'title', coalesce((SELECT max(ch.changed_at) FROM ch WHERE ch.field = 'title'), '-infinity'),
                                        'the conversation''s title, set before it, is not redacted'
                                  WHERE v_conv ->> 'title' IS NOT NULL
                                 UNION ALL
                                 SELECT 'generations', g.started_at, format('generation %s, started before it, is not redacted', g.id)
                                   FROM g WHERE to_jsonb(g)::text IS DISTINCT FROM convo_private.redact_row('generations', to_jsonb(g))::text
                                 UNION ALL
                                 SELECT 'effects', e.requested_at, format('effect %s, requested before it, is not redacted', e.id)
                                   FROM e WHERE e.arguments IS DISTINCT FROM '{}'::jsonb
                                 UNION ALL
                                 SELECT 'events', v.at, format('event seq %s, before it, is not redacted', v.seq)
                                   FROM v WHERE v.evidence IS DISTINCT FROM '{}'::jsonb
                                 UNION ALL
                                 SELECT 'origins', m.created_at, format('the origin of message %s is not redacted', o.message_id)
                                   FROM o JOIN m ON m.id = o.message_id WHERE o.node IS DISTINCT FROM '{"erased": true}'::jsonb) u
                          WHERE EXISTS (SELECT 1 FROM r)
                          ORDER BY u.kind, u.since) u
                   CROSS JOIN LATERAL (SELECT r.id, r.erased_at FROM r WHERE r.erased_at >= u.since
                                        ORDER BY r.erased_at LIMIT 1) f
                 UNION ALL
                 SELECT r.id, r.erased_at, format('place %s is not one an erasure writes', x.place)
                   FROM r CROSS JOIN LATERAL jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                        x (place text, rows_redacted bigint)
                   LEFT JOIN counts c ON c.place = x.place
                  WHERE c.place IS NULL
                 UNION ALL
                 -- A place once an erasure, counting at least one row.
                 SELECT r.id, r.erased_at, CASE WHEN x.rows_redacted IS NULL OR x.rows_redacted < 1
                                                THEN format('place %s counts %s rows', x.place, coalesce(x.rows_redacted::text, 'no'))
                                                ELSE format('place %s appears twice', x.place) END
                   FROM r CROSS JOIN LATERAL (
                        SELECT y.place, y.rows_redacted, count(*) OVER (PARTITION BY y.place) AS times
                          FROM jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                               y (place text, rows_redacted bigint)) x
                  WHERE x.rows_redacted IS NULL OR x.rows_redacted < 1 OR x.times > 1
                 UNION ALL
                 SELECT r.id, r.erased_at, format('place %s counts %s rows, the export holds %s', x.place, x.rows_redacted, c.n)
                   FROM r CROSS JOIN LATERAL jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                        x (place text, rows_redacted bigint)
                   JOIN counts c ON c.place = x.place
                  WHERE x.rows_redacted > c.n) x
          ORDER BY x.erased_at LIMIT 1)
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

-- unreadable_row: the first row of an export document that its table's
-- column types refuse (a value too long, an interval or time that does not
-- parse), named as import_conversation names a row: its place in the
-- document and its id, seq or key; NULL when every row reads. A value that
-- fails its cast fails it with no table or row in the server's error, so a
-- refused restore reads the document again, row by row, on that path only.
CREATE OR REPLACE FUNCTION convo_private.unreadable_row(p_export jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_place record;
    v_row   record;
BEGIN
    BEGIN
        PERFORM jsonb_populate_record(NULL::convo.conversations, p_export -> 'conversation');
    EXCEPTION WHEN data_exception THEN
        RETURN ', conversation';
    END;
    FOR v_place IN
        SELECT * FROM (VALUES ('messages', 'messages'), ('head_log', 'conversation_head_log'),
                              ('changes', 'conversation_changes'), ('generations', 'generations'),
                              ('tool_calls', 'tool_effect_calls'), ('effects', 'tool_effects'),
                              ('effect_events', 'tool_effect_events'), ('tools', 'tools'), ('erasures', 'erasures'),
                              ('origins', 'import_origins'), ('imports', 'imports')) AS p (key, tab)
         WHERE jsonb_typeof(p_export -> p.key) = 'array'
    LOOP
        FOR v_row IN SELECT j.elem, j.n FROM jsonb_array_elements(p_export -> v_place.key) WITH ORDINALITY j (elem, n) LOOP
            BEGIN
                EXECUTE format('SELECT jsonb_populate_record(NULL::convo.%I, $1)', v_place.tab) USING v_row.elem;
            EXCEPTION WHEN data_exception THEN
                RETURN format(', %s row %s of the array (%s)', v_place.key, v_row.n,
                              coalesce('id ' || (v_row.elem ->> 'id'), 'seq ' || (v_row.elem ->> 'seq'),
                                       'call ' || (v_row.elem ->> 'tool_call_id'), 'name ' || (v_row.elem ->> 'name'),
                                       'message ' || (v_row.elem ->> 'message_id'), 'no id'));
            END;
        END LOOP;
    END LOOP;
    RETURN NULL;
END;
$$;

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
