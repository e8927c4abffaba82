-- 0048_rerun_lookup_by_place down: reverses 0048_rerun_lookup_by_place.up.sql.

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
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
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
    v_problem   text;
    v_stored    jsonb;
    v_messages  convo_private.new_message[];
    v_state     text;
    v_table     text;
    v_constraint text;
    v_column    text;
    v_message   text;
    v_detail    text;
    v_check     text;
    v_row       text;
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'import conversations');

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
        -- A document from before 0044 had no deletion, no erasure mark and
        -- no incomplete answer: it is read as one with none, erased from its
        -- first erasure as a restore marks it (that erasure's own time, as
        -- the document spells it).
        IF NOT v_conv ? 'deleted_at' AND NOT v_conv ? 'erased_at' THEN
            v_conv := v_conv || jsonb_build_object('deleted_at', NULL, 'erased_at',
                (SELECT e.elem -> 'erased_at' FROM jsonb_array_elements(p_export -> 'erasures') AS e (elem)
                  WHERE jsonb_typeof(e.elem) = 'object'
                  ORDER BY (e.elem ->> 'erased_at')::timestamptz LIMIT 1));
            p_export := p_export || jsonb_build_object('conversation', v_conv);
        END IF;
        IF jsonb_typeof(p_export -> 'messages') = 'array'
           AND EXISTS (SELECT 1 FROM jsonb_array_elements(p_export -> 'messages') AS e (elem)
                        WHERE jsonb_typeof(e.elem) = 'object' AND NOT e.elem ? 'incomplete') THEN
            p_export := p_export || jsonb_build_object('messages',
                (SELECT jsonb_agg(CASE WHEN jsonb_typeof(e.elem) = 'object' AND NOT e.elem ? 'incomplete'
                                       THEN e.elem || '{"incomplete": false}' ELSE e.elem END ORDER BY e.n)
                   FROM jsonb_array_elements(p_export -> 'messages') WITH ORDINALITY AS e (elem, n)));
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
        IF EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = v_id) THEN
            IF convo_private.restore_repeat(p_owner_id, v_id, v_digest, p_export) THEN
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

        -- erased_at as the document has it: restore_problem checked that it
        -- is the time of the first of the document's erasures.
        INSERT INTO convo.conversations (id, owner_id, metadata, created_at, title, archived, last_activity_at, erased_at)
        VALUES (v_id, p_owner_id, v_conv -> 'metadata', (v_conv ->> 'created_at')::timestamptz, v_conv ->> 'title',
                (v_conv ->> 'archived')::boolean, (v_conv ->> 'last_activity_at')::timestamptz,
                (v_conv ->> 'erased_at')::timestamptz)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            -- The insert waited for another session's restore under this
            -- id, now committed: a retry of the same document (its digest
            -- on record) is a repeat, as above, and writes nothing.
            IF convo_private.restore_repeat(p_owner_id, v_id, v_digest, p_export) THEN
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
        SELECT array_agg((m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at,
                          coalesce(m.incomplete, false))::convo_private.new_message
                         ORDER BY m.depth, m.sibling_index)
          INTO v_messages
          FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m;
        PERFORM convo_private.write_messages(v_id, NULL, v_messages, p_import_id => v_import);

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
        INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted, conversation_id)
        SELECT j.elem ->> 'owner_id', (j.elem ->> 'id')::uuid, p.place, p.rows_redacted, v_id
          FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
               LATERAL jsonb_to_recordset(j.elem -> 'places') p (place text, rows_redacted bigint);

        -- Effects as they stand (their event chains were checked above). The
        -- scope key is computed here (scope_key, this database's secret)
        -- from the creating call's input in the effect's key epoch
        -- (key_epoch: the document's erasures, written above, by its
        -- requested_at). Where erasure left no input, the key
        -- is 'erased:' and the effect's id, which no call's key can be: the
        -- document's, made under another secret, cannot be checked here,
        -- and a planted one would be matched by a later call. The
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
                                           'scope_key', coalesce(q.scope_key, 'erased:' || (j.elem ->> 'id')))
                    || CASE WHEN j.elem ->> 'state' = 'awaiting_confirmation' OR q.decision = 'rejected'
                            THEN jsonb_build_object('idempotency_key', coalesce(q.scope_key, 'erased:' || (j.elem ->> 'id')))
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
                           convo_private.export_row_name(g.raw) AS name,
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
            v_key := (SELECT p.key FROM convo_private.export_places() p WHERE p.tab = v_table);
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
                EXECUTE format('SELECT format(%L, j.n, convo_private.export_row_name(j.elem))
                                  FROM jsonb_array_elements($1) WITH ORDINALITY j (elem, n),
                                       LATERAL jsonb_populate_record(NULL::convo.%I, j.elem) r
                                 WHERE (%s) IS NOT TRUE
                                 ORDER BY j.n LIMIT 1',
                               ', ' || v_key || ' row %s of the array (%s)', v_table,
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

-- call_fork_point: the fork point record_tool_call gives a new call of
-- p_message_id: what fork_point_of's walk would find, taken from the
-- nearest message above with a recorded call when no person's turn lies
-- between (each call of an agent turn records the turn's fork point, and
-- only pgconvo writes those rows; self_check compares each with the walk,
-- ledger_problems). So the k calls of one agent turn cost a few steps each,
-- not a walk to the turn's start each.
CREATE OR REPLACE FUNCTION convo_private.call_fork_point(p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id     uuid := p_message_id;
    v_parent uuid;
    v_role   text;
    v_parts  jsonb;
    v_fork   uuid;
BEGIN
    WHILE v_id IS NOT NULL LOOP
        SELECT m.parent_id, m.role, m.parts INTO v_parent, v_role, v_parts
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
        IF v_role = 'user' AND EXISTS (SELECT 1 FROM jsonb_array_elements(v_parts) e (part)
                                        WHERE e.part ->> 'type' IS DISTINCT FROM 'tool_result') THEN
            RETURN v_parent;
        END IF;
        SELECT l.fork_point_id INTO v_fork
          FROM convo.keyed_parts k
          JOIN convo.tool_effect_calls l ON l.conversation_id = k.conversation_id AND l.tool_call_id = k.tool_call_id
         WHERE k.conversation_id = p_conversation_id AND k.message_id = v_id AND k.type = 'tool_use'
         LIMIT 1;
        IF FOUND THEN
            RETURN v_fork;
        END IF;
        v_id := v_parent;
    END LOOP;
    RETURN NULL;
END;
$$;

-- ledger_problems: every ledger row of one conversation (NULL: of every
-- conversation) that the API could not have written, one row each, naming
-- the row and what is wrong with it:
--   a call's decision that does not follow from the tool version it was
--   checked against (replay for an effectful tool, a ledger decision for one
--   without effects), or that names another tool than its tool_use part;
--   a fork point that is not the call's (fork_points: the walk of
--   fork_point_of, made once down each conversation's tree, so an agent
--   turn of k calls costs its length once, not k times);
--   a reuse whose effect's scope key is not the one the call would compute
--   (a link across scopes);
--   an effect its creating call does not explain: another tool version, a
--   first state the decision does not give, a rejection without its 422, a
--   re-run that repeats no earlier call of the same tool and fork point on
--   another branch, arguments other than the call's input, an amount or
--   currency other than the registration reads from them (effect_money), a
--   scope key other than scope_key computes, a verdict of the schema other
--   than args_errors gives.
-- A key is computed in its key epoch (key_epoch): an effect's at its
-- requested_at, a reusing call's at its decided_at.
-- Content erased since (a part that is exactly its redaction) is not
-- compared: only its shape is left. self_check reports these for the whole
-- database, so a forgery by a superuser's hand is found too;
-- import_conversation refuses a document that leaves any (CV011).
CREATE OR REPLACE FUNCTION convo_private.ledger_problems(p_conversation_id uuid)
RETURNS TABLE (conversation_id uuid, row_name text, problem text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH calls AS MATERIALIZED (
        SELECT l.conversation_id, l.tool_call_id, l.message_id, l.effect_id, l.decision, l.fork_point_id,
               l.decided_at, l.tool_name, l.tool_version, p.tool_name AS part_tool, m.parts -> l.ordinal -> 'input' AS input,
               (m.parts -> l.ordinal)::text = convo_private.redact_part(m.parts -> l.ordinal)::text AS erased,
               t.effectful, t.idempotency_scope AS scope
          FROM convo.tool_effect_calls l
          JOIN convo.keyed_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
          JOIN convo.tools t ON t.name = l.tool_name AND t.version = l.tool_version
         WHERE p_conversation_id IS NULL OR l.conversation_id = p_conversation_id),
    effects AS MATERIALIZED (
        SELECT e.conversation_id, e.id, e.tool_name, e.tool_version, e.idempotency_key, e.scope_key, e.arguments,
               e.amount_minor, e.currency::text AS currency, e.repeats_effect_id, e.http_status, e.error_code,
               e.requested_at,
               t.effectful, t.idempotency_scope AS scope, t.amount_arg, t.currency_arg, t.args_schema,
               c.tool_call_id AS by_call, c.decision AS by_decision, c.input AS by_input, c.erased AS by_erased,
               c.message_id AS by_message, c.fork_point_id AS by_fork, c.tool_name AS by_tool,
               c.tool_version AS by_version,
               (SELECT v.to_state FROM convo.tool_effect_events v
                 WHERE v.conversation_id = e.conversation_id AND v.effect_id = e.id
                 ORDER BY v.seq LIMIT 1) AS first_state
          FROM convo.tool_effects e
          JOIN convo.tools t ON t.name = e.tool_name AND t.version = e.tool_version
          JOIN calls c ON c.conversation_id = e.conversation_id AND c.effect_id = e.id
                      AND c.decision IN ('execute', 'confirm', 'rejected')
         WHERE p_conversation_id IS NULL OR e.conversation_id = p_conversation_id),
    forks AS MATERIALIZED (
        SELECT v.conversation_id, f.message_id, f.fork
          FROM (SELECT DISTINCT c.conversation_id FROM calls c) v
         CROSS JOIN LATERAL convo_private.fork_points(v.conversation_id) f)
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('decision %s for %s version %s, which %s', c.decision, c.tool_name, c.tool_version,
                  CASE WHEN c.effectful THEN 'is effectful (replay is for tools without effects)'
                       ELSE 'has no effects (its calls are replayed)' END)
      FROM calls c
     WHERE (c.decision = 'replay') = c.effectful
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('is recorded for tool %s, its tool_use part names %s', c.tool_name, c.part_tool)
      FROM calls c
     WHERE c.tool_name IS DISTINCT FROM c.part_tool
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('fork point %s, the call''s is %s', coalesce(c.fork_point_id::text, 'the conversation'),
                  coalesce(f.fork::text, 'the conversation'))
      FROM calls c
      LEFT JOIN forks f ON f.conversation_id = c.conversation_id AND f.message_id = c.message_id
     WHERE c.fork_point_id IS DISTINCT FROM f.fork
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('reuses effect %s, whose scope key is not the one the call computes (%s)', c.effect_id, c.scope)
      FROM calls c
      JOIN convo.tool_effects e ON e.conversation_id = c.conversation_id AND e.id = c.effect_id
     WHERE c.decision = 'reuse' AND NOT c.erased
       AND e.scope_key IS DISTINCT FROM convo_private.scope_key(c.scope, c.conversation_id, c.tool_call_id,
                                                                c.fork_point_id, c.tool_name, c.input,
                                                                convo_private.key_epoch(c.conversation_id, c.decided_at))
    UNION ALL
    SELECT e.conversation_id, 'effect ' || e.id, x.problem
      FROM effects e
     CROSS JOIN LATERAL convo_private.effect_money(e.arguments, e.amount_arg, e.currency_arg) m
     CROSS JOIN LATERAL (VALUES
        (CASE WHEN (e.by_tool, e.by_version) IS DISTINCT FROM (e.tool_name, e.tool_version)
              THEN format('is of %s version %s, its call %s of %s version %s', e.tool_name, e.tool_version,
                          e.by_call, e.by_tool, e.by_version) END),
        (CASE WHEN e.first_state IS DISTINCT FROM CASE e.by_decision WHEN 'execute' THEN 'pending'
                                                                     WHEN 'confirm' THEN 'awaiting_confirmation'
                                                                     ELSE 'failed' END
              THEN format('began %s, its call %s decided %s', coalesce(e.first_state, 'with no event'), e.by_call,
                          e.by_decision) END),
        (CASE WHEN e.by_decision = 'rejected' AND (e.http_status, e.error_code) IS DISTINCT FROM (422, 'invalid_arguments')
              THEN format('was rejected with %s %s, not 422 invalid_arguments', e.http_status, e.error_code) END),
        (CASE WHEN (e.by_decision = 'confirm') <> (e.repeats_effect_id IS NOT NULL)
              THEN format('repeats %s, its call %s decided %s', coalesce(e.repeats_effect_id::text, 'nothing'),
                          e.by_call, e.by_decision) END),
        (CASE WHEN e.by_decision = 'confirm' AND NOT EXISTS (
                  SELECT 1 FROM calls r
                   WHERE r.conversation_id = e.conversation_id AND r.effect_id = e.repeats_effect_id
                     AND r.decision IN ('execute', 'reuse', 'confirm') AND r.tool_name = e.by_tool
                     AND r.fork_point_id IS NOT DISTINCT FROM e.by_fork
                     AND NOT convo_private.is_on_path(e.conversation_id, r.message_id, e.by_message))
              THEN format('repeats effect %s, which no call of %s at the same fork point on another branch made',
                          e.repeats_effect_id, e.by_tool) END),
        (CASE WHEN NOT e.by_erased AND e.arguments::text IS DISTINCT FROM e.by_input::text
              THEN format('has arguments other than the input of its call %s', e.by_call) END),
        (CASE WHEN NOT e.by_erased AND (e.amount_minor, e.currency) IS DISTINCT FROM (m.amount_minor, m.currency)
              THEN format('amount %s %s, its arguments say %s %s (tool %s version %s reads %s and %s)',
                          coalesce(e.amount_minor::text, 'none'), coalesce(e.currency, 'none'),
                          coalesce(m.amount_minor::text, 'none'), coalesce(m.currency, 'none'),
                          e.tool_name, e.tool_version, coalesce(e.amount_arg, 'no amount'),
                          coalesce(e.currency_arg, 'no currency')) END),
        (CASE WHEN NOT e.by_erased
                   AND e.scope_key IS DISTINCT FROM convo_private.scope_key(
                           CASE WHEN e.by_decision = 'rejected' THEN 'rejected' ELSE e.scope END,
                           e.conversation_id, e.by_call, e.by_fork, e.tool_name, e.by_input,
                           convo_private.key_epoch(e.conversation_id, e.requested_at))
              THEN format('scope key is not the one its call %s computes', e.by_call) END),
        (CASE WHEN NOT e.by_erased AND e.effectful
                   AND (e.by_decision = 'rejected') <> (cardinality(convo.args_errors(e.args_schema, e.by_input)) > 0)
              THEN format('was %s, but its input %s the schema of %s version %s', e.by_decision,
                          CASE WHEN e.by_decision = 'rejected' THEN 'passes' ELSE 'fails' END,
                          e.tool_name, e.tool_version) END)
     ) AS x (problem)
     WHERE x.problem IS NOT NULL;
END;
$$;

-- record_tool_call: writes one tool call's ledger decision, from
-- write_messages, in the transaction that stores its tool_use part, before
-- any request can leave, against the tool's latest version at that moment,
-- which the call's row names (so the decision can be checked against it).
-- An unregistered tool gets no row (effect_for_call answers CV007, even once
-- it is registered); write_messages calls it for no import (those calls
-- happened elsewhere). A new effect's first event is written with it
-- (effect_event). Its statements run on the plans its caller runs on
-- (write_messages: generic plans, made once), so a call plans nothing but
-- the re-run lookup (rerun_candidate). A generic plan made while the ledger
-- was nearly empty may scan it (or the conversation's part of it) whatever
-- the index, and a message of N calls grows the ledger within one
-- statement: so from a message's eighth part on, write_messages calls it
-- through record_tool_call_planned, which plans each call afresh against
-- the ledger as the earlier calls left it, and N calls cost N lookups, not
-- N squared.
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
    p_input           jsonb)
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
            -- A candidate on this message's path (an earlier call of the same
            -- agent turn) is no re-run: the path's segments are read once and
            -- each candidate's message looked up against them
            -- (rerun_candidate), not walked again.
            SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_seg_branches, v_seg_depths
              FROM convo_private.path_segments(p_conversation_id, p_message_id) s;
            v_repeats := convo_private.rerun_candidate(p_conversation_id, p_message_id, v_fork, p_tool_name,
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
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id, tool_name, tool_version)
    VALUES (p_conversation_id, p_tool_call_id, p_message_id, p_ordinal, v_effect.id, v_decision, v_fork,
            v_tool.name, v_tool.version);
END;
$$;

-- record_tool_call_planned: record_tool_call with every statement planned
-- for its call (its own, its helpers' and the foreign key checks of its
-- inserts), for a message's later calls: a message of N calls grows the
-- ledger within one statement, and a plan cached while the tables were
-- nearly empty (a sequential scan, or a scan of the conversation's rows by
-- another index) would make each call cost the calls before it.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call_planned(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_ordinal         int,
    p_tool_call_id    text,
    p_tool_name       text,
    p_input           jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    PERFORM convo_private.record_tool_call(p_conversation_id, p_message_id, p_ordinal, p_tool_call_id,
                                           p_tool_name, p_input);
END;
$$;

-- rerun_candidate: the effect that a new call of p_tool_name on
-- p_message_id would run again, for record_tool_call: the latest effect of
-- the same tool called at the same fork point by another message that is
-- not on this message's path (given as its segments, path_segments). The
-- calls of this very message are on its path by definition: two ranges of
-- tool_effect_calls_fork_idx skip them, so N calls in one message cost N
-- lookups, not N squared; a candidate on the path (an earlier call of the
-- same agent turn) is looked up against the segments (is_on_segments), not
-- walked again.
CREATE OR REPLACE FUNCTION convo_private.rerun_candidate(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_fork            uuid,
    p_tool_name       text,
    p_branches        uuid[],
    p_depths          int[])
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
-- Planned for each call: the one statement of record_tool_call whose plan
-- depends on the fork point and the ledger's size. Its generic plan (even
-- with the fork point as an equality), made on a nearly empty ledger, read
-- every effect of the conversation and the candidates for each: an agent
-- turn of 400 calls in one transaction on a new database took 170 s, not
-- 2.3 s.
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN (SELECT l.effect_id
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = p_conversation_id
               AND (l.fork_point_id = p_fork OR (p_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < p_message_id OR l.message_id > p_message_id)
               AND e.tool_name = p_tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_segments(p_conversation_id, l.message_id, p_branches, p_depths)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1);
END;
$$;

-- restore_problem: the first reason, naming the key and the row, why an
-- export document is not a history this database could have written, or
-- NULL. import_conversation refuses the document with it (CV011) before
-- writing anything; what needs the stored tree (the ledger's decisions,
-- links and amounts) is ledger_problems', after. In one pass each:
--   references: every id the document names is in it, and the chains hold
--   (parents, depths, the head log ending at the head, effects' events from
--   'requested' to their state, each effect created by one call, a
--   rejected one's a rejection); an
--   origin's format has an import in the document's record of imports;
--   numbers: a head-log, change or event seq is there and appears once
--   (import_conversation renumbers them, keeping their order);
--   reasons: the head log's are the API's ('direct_update' is never
--   restored; 'create' only begins a log, 'import' begins one with an
--   import from another product in the document, or is a later merge that
--   names one of its imports; a message from another product is only in a
--   log begun by 'import');
--   keys: an effect's idempotency key is its scope key, the re-run key of
--   its confirmation, or (sent before digests were keyed) a plain digest of
--   its scope;
--   generations: a generation's message is an assistant answer to its
--   prompt, incomplete when it was cancelled or failed and only then, one
--   generation's only, and an incomplete message is such a generation's
--   (the generations guard's rule for a direct write);
--   times: each is there and finite; in order: nothing after p_now or
--   before the conversation, the last activity not before it, a head
--   move not before its message, events of an effect in order and not
--   before it, an effect not before its call nor confirmed, settled or
--   compensated before it was requested, a call not before its
--   message, a generation not before its prompt nor ending before it began;
--   a message not before its parent unless it came from another product
--   (an origin), whose times are the source's, but not after the import of
--   its format nor the one it names; an 'import' head move to such a message;
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
         -- format and the latest import of it in the document, and the
         -- import the message names (a merge's messages are its own, not
         -- the first import's).
         io AS (SELECT i.format, max(i.imported_at) AS imported_at FROM i GROUP BY i.format),
         mo AS (SELECT m.*, x.source, x.message_id IS NOT NULL AS imported, io.imported_at AS source_imported_at,
                       mi.imported_at AS own_imported_at
                  FROM m
                  LEFT JOIN (SELECT DISTINCT ON (o.message_id) o.message_id, o.source FROM o ORDER BY o.message_id) x
                    ON x.message_id = m.id
                  LEFT JOIN io ON io.format = x.source
                  LEFT JOIN i mi ON mi.id = m.import_id),
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
        -- A rejected call made a failed effect that repeats none and was
        -- never confirmed (record_tool_call); a confirmation on it would
        -- meet a CHECK of tool_effects, naming no row. (How the other
        -- decisions began is ledger_problems', after.)
        (SELECT format('tool_calls: call %s decided rejected, but its effect %s is no rejection (a failed effect, repeating none, never confirmed)',
                       k.tool_call_id, e.id)
           FROM k JOIN e ON e.id = k.effect_id
          WHERE k.decision = 'rejected'
            AND (e.state IS DISTINCT FROM 'failed' OR e.repeats_effect_id IS NOT NULL OR e.confirmed_by IS NOT NULL) LIMIT 1)        UNION ALL
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
        -- (A later 'import' is a merge of the same source, which names its
        -- import: one of the document's records, or the restore that carried
        -- it.)
        (SELECT format('head_log: row seq %s has reason %s, which only begins a head log%s', x.seq, x.reason,
                       CASE WHEN x.reason = 'import' THEN ' or names an import of the export' ELSE '' END)
           FROM (SELECT l.seq, l.reason, l.import_id, row_number() OVER (ORDER BY l.seq) AS n FROM l) x
          WHERE x.n > 1 AND (x.reason = 'create'
                             OR (x.reason = 'import' AND NOT EXISTS (SELECT 1 FROM i WHERE i.id = x.import_id)))
          ORDER BY x.seq LIMIT 1)
        UNION ALL
        -- An import (or a merge) moves the head only to a message from
        -- another product, never to one the API wrote.
        (SELECT format('head_log: row seq %s has reason import, and its head %s came from no import', l.seq, l.head_message_id)
           FROM l JOIN mo m ON m.id = l.head_message_id WHERE l.reason = 'import' AND NOT m.imported ORDER BY l.seq LIMIT 1)
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
            -- A key sent before digests were keyed keeps its plain form: a
            -- digest under the same scope. The scopes are the API's, never a
            -- pattern read from the document.
            AND NOT (e.confirmed_by IS NULL AND e.state <> 'awaiting_confirmation'
                     AND e.idempotency_key ~ '^(tool_call|conversation_args|fork_args|rejected):[0-9a-f]{64}$'
                     -- (An erased effect restored before is keyed 'erased:' and
                     -- its id, and keeps the key it was sent under.)
                     AND split_part(e.scope_key, ':', 1) IN (split_part(e.idempotency_key, ':', 1), 'erased'))
          LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s has scope key %s, which is no scope''s key', e.id, e.scope_key)
           FROM e WHERE e.scope_key !~ '^(tool_call|conversation_args|fork_args|rejected):[0-9a-f]{64}$'
                    AND e.scope_key !~ '^erased:[0-9a-f-]{36}$' LIMIT 1)
        UNION ALL
        -- A confirmation's event is by whoever confirmed it (confirm_effect
        -- writes the one name to both), and someone did.
        (SELECT format('effect_events: effect %s was confirmed by %s, its event seq %s says %s', e.id,
                       coalesce(nullif(e.confirmed_by, ''), 'nobody'), v.seq, coalesce(v.actor, 'nobody'))
           FROM e JOIN v ON v.effect_id = e.id AND v.from_state = 'awaiting_confirmation' AND v.to_state = 'pending'
          WHERE e.confirmed_by IS NULL OR e.confirmed_by = '' OR v.actor IS DISTINCT FROM e.confirmed_by LIMIT 1)
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
             OR (m.imported AND (m.created_at > m.source_imported_at OR m.created_at > m.own_imported_at)) LIMIT 1)
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
        -- A generation's message is an assistant answer to its prompt,
        -- incomplete when the generation was cancelled or failed and only
        -- then, as the generations guard requires of a direct write; an
        -- incomplete message is such a generation's.
        (SELECT format('generations: generation %s is %s by message %s, not an assistant answer to its prompt %s%s',
                       g.id, g.state, g.message_id, g.prompt_message_id,
                       CASE WHEN g.state = 'completed' THEN '' ELSE ' marked incomplete' END)
           FROM g LEFT JOIN m ON m.id = g.message_id
          WHERE g.message_id IS NOT NULL
            AND (m.id IS NULL OR m.parent_id IS DISTINCT FROM g.prompt_message_id OR m.role IS DISTINCT FROM 'assistant'
                 OR coalesce(m.incomplete, false) IS DISTINCT FROM (g.state <> 'completed')) LIMIT 1)
        UNION ALL
        (SELECT format('generations: message %s answers %s generations, not one', g.message_id, count(*))
           FROM g WHERE g.message_id IS NOT NULL GROUP BY g.message_id HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('messages: message %s is marked incomplete, and no cancelled or failed generation answered with it', m.id)
           FROM m WHERE m.incomplete AND NOT EXISTS (SELECT 1 FROM g WHERE g.message_id = m.id AND g.state IN ('cancelled', 'failed'))
          LIMIT 1)
        UNION ALL
        -- A completed generation began before its answer was written and
        -- finished after; the head it began at was there when it began.
        (SELECT format('generations: generation %s %s', g.id, CASE
                    WHEN a.created_at < g.started_at THEN format('is answered by message %s, created before it started', a.id)
                    WHEN a.created_at > g.finished_at THEN format('is answered by message %s, created after it finished', a.id)
                    ELSE format('began at head %s, created after it started', h.id) END)
           FROM g LEFT JOIN m a ON a.id = g.message_id
           LEFT JOIN m h ON h.id = g.head_at_begin
          WHERE a.created_at < g.started_at OR a.created_at > g.finished_at OR h.created_at > g.started_at LIMIT 1)
        UNION ALL
        (SELECT format('generations: generation %s %s', g.id, CASE
                    WHEN g.started_at > p_now OR g.finished_at > p_now THEN 'is dated after the import'
                    WHEN g.finished_at < g.started_at THEN 'finished before it started'
                    ELSE 'started before its prompt message was created' END)
           FROM g JOIN mo m ON m.id = g.prompt_message_id
          WHERE g.started_at > p_now OR g.finished_at > p_now OR g.finished_at < g.started_at
             OR (NOT m.imported AND g.started_at < m.created_at) LIMIT 1)
        UNION ALL
        -- An import from another product writes no ledger row: a call of an
        -- imported message (whose times are the source's) is no call the
        -- API decided.
        (SELECT format('tool_calls: call %s is of message %s, imported from %s, which writes no ledger row',
                       k.tool_call_id, m.id, m.source)
           FROM k JOIN mo m ON m.id = k.message_id WHERE m.imported LIMIT 1)
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
        -- before left (a title from none, an archive state or a deletion
        -- from false), the last one what the conversation holds (never
        -- deleted), in time order.
        (SELECT format('changes: row seq %s appears twice', ch.seq) FROM ch GROUP BY ch.seq HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changes %s, which is not title, archived or deleted', ch.seq, coalesce(ch.field, 'nothing'))
           FROM ch WHERE ch.field IS NULL OR ch.field NOT IN ('title', 'archived', 'deleted') LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changes %s from %s, which is not what it was (%s)', x.seq, x.field,
                       coalesce(x.old_value, 'none'), coalesce(x.before, 'none'))
           FROM (SELECT ch.seq, ch.field, ch.old_value,
                        coalesce(lag(ch.new_value, 1, CASE WHEN ch.field <> 'title' THEN 'false' END)
                                     OVER (PARTITION BY ch.field ORDER BY ch.seq),
                                 CASE WHEN ch.field <> 'title' THEN 'false' END) AS before
                   FROM ch WHERE ch.field IN ('title', 'archived', 'deleted')) x
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
                   LEFT JOIN (SELECT ch.new_value, ch.seq FROM ch WHERE ch.field = 'archived' ORDER BY ch.seq DESC LIMIT 1) x ON true
                 UNION ALL
                 -- A restore makes a conversation that is not deleted: a
                 -- deleted one's document restores once it is brought back.
                 SELECT 'deleted', 'false', coalesce(x.new_value, 'false'), x.seq
                   FROM (SELECT NULL) one
                   LEFT JOIN (SELECT ch.new_value, ch.seq FROM ch WHERE ch.field = 'deleted' ORDER BY ch.seq DESC LIMIT 1) x ON true) f
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
        UNION ALL
        -- Messages from another product are an import's: an import begins
        -- the log of the conversation it writes, and a merge finds its
        -- conversation by an earlier import of the source. A log begun
        -- otherwise ('create', or any move of the API's), or none at all,
        -- is a conversation the API began, holding no such message (nor a
        -- source's time from before it). Late, so that a rule naming what is
        -- wrong with the message itself (its origin, its times, a ledger
        -- call on it) speaks first.
        (SELECT format('head_log: %s, and message %s came from an import, which only a log begun by an import holds',
                       coalesce(format('row seq %s has reason %s', x.seq, x.reason), 'there is no head move'), m.id)
           FROM (SELECT 1) one
           LEFT JOIN (SELECT l.seq, l.reason FROM l ORDER BY l.seq LIMIT 1) x ON true
           JOIN mo m ON m.imported
          WHERE x.reason IS DISTINCT FROM 'import' LIMIT 1)
        UNION ALL
        -- Last, so that a rule naming the row at fault speaks first: the
        -- conversation is erased from its first erasure on, as
        -- erase_content marks it, and not deleted (a restore makes a
        -- conversation its owner sees).
        (SELECT format('conversation: erased_at %s, where the first of its erasures: %s', coalesce(c.erased_at::text, 'none'),
                       coalesce(f.id || ' at ' || f.erased_at, 'none'))
           FROM jsonb_populate_record(NULL::convo.conversations, v_conv) c
           LEFT JOIN LATERAL (SELECT r.id, r.erased_at FROM r ORDER BY r.erased_at, r.id LIMIT 1) f ON true
          WHERE c.erased_at IS DISTINCT FROM f.erased_at)
        UNION ALL
        (SELECT format('conversation: deleted at %s; a deleted conversation is restored once restore_deleted_conversation has brought it back',
                       c.deleted_at)
           FROM jsonb_populate_record(NULL::convo.conversations, v_conv) c WHERE c.deleted_at IS NOT NULL)
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
                SELECT m.id, (e.n - 1)::int AS ordinal, e.part
                  FROM unnest(v_ids, v_parts) WITH ORDINALITY AS m (id, parts, i),
                       jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                 WHERE e.part ->> 'type' = 'tool_use'
                 ORDER BY m.i, e.n
            LOOP
                -- A message's first calls on this function's generic plans;
                -- from its eighth part on, each planned afresh against the
                -- ledger the earlier ones grew (record_tool_call_planned).
                IF v_call.ordinal < 7 THEN
                    PERFORM convo_private.record_tool_call(p_conversation_id, v_call.id, v_call.ordinal,
                                                           v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input');
                ELSE
                    PERFORM convo_private.record_tool_call_planned(p_conversation_id, v_call.id, v_call.ordinal,
                                                                   v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input');
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
DROP FUNCTION convo_private.record_tool_call_planned(uuid, uuid, int, text, text, jsonb, uuid, int);
DROP FUNCTION convo_private.record_tool_call(uuid, uuid, int, text, text, jsonb, uuid, int);
DROP FUNCTION convo_private.rerun_candidate(uuid, uuid, text, uuid[], int[]);
DROP INDEX convo.tool_effect_calls_rerun_idx;
CREATE INDEX tool_effect_calls_fork_idx ON convo.tool_effect_calls USING btree (conversation_id, fork_point_id, message_id);
ALTER TABLE convo.tool_effect_calls DROP COLUMN branch_id, DROP COLUMN depth;

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
