-- 0032_erasure_key_epochs down: reverses 0032_erasure_key_epochs.up.sql.

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

-- begin_receipt: the receipt row first, in pending, before the model fills
-- any argument: one allowlisted tool, its version frozen here. A repeat with
-- the same owner and key returns the first row (created = false); the same
-- key with another tool or request raises CV009. A convo_app session files
-- receipts only for the owner it set (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.begin_receipt(
    p_owner_id        text,
    p_idempotency_key text,
    p_tool_name       text,
    p_request         jsonb DEFAULT '{}')
RETURNS TABLE (receipt_id uuid, status text, http_status int, error_code text, result_ref text, created boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tool    convo.tools;
    v_digest  text;
    v_receipt convo.tool_receipts;
    v_now     timestamptz;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' OR p_request IS NULL OR p_tool_name IS NULL THEN
        RAISE EXCEPTION 'p_owner_id, p_tool_name and p_request are required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, tool %s, key %s', coalesce(p_owner_id, 'NULL'),
                                                     coalesce(p_tool_name, 'NULL'), coalesce(p_idempotency_key, 'NULL'));
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not create receipts for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
    IF p_idempotency_key IS NULL OR length(p_idempotency_key) NOT BETWEEN 8 AND 255 THEN
        RAISE EXCEPTION 'an idempotency key is 8 to 255 characters'
            USING ERRCODE = 'CV011', DETAIL = format('key %s', coalesce(quote_literal(p_idempotency_key), 'NULL'));
    END IF;
    PERFORM convo_private.check_size('p_request', p_request, convo.max_request_bytes());
    -- Keyed (keyed_digest): the digest outlives an erasure of the request.
    v_digest := convo_private.keyed_digest(encode(sha256(convert_to(p_request::text, 'UTF8')), 'hex'));

    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    IF NOT FOUND THEN
        v_tool := convo_private.tool_ref(p_tool_name);
        v_now := clock_timestamp();
        INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest,
                                         created_at, deadline_at)
        VALUES (gen_random_uuid(), p_owner_id, p_idempotency_key, v_tool.name, v_tool.version, p_request, v_digest,
                v_now, v_now + v_tool.deadline)
        ON CONFLICT (owner_id, idempotency_key) DO NOTHING
        RETURNING * INTO v_receipt;
        IF FOUND THEN
            PERFORM convo_private.notify_receipt(v_receipt.id, 'pending', false);
            RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                                v_receipt.result_ref, true;
            RETURN;
        END IF;
        -- Another transaction filed the same key first: answer as a repeat.
        SELECT * INTO v_receipt FROM convo.tool_receipts r
         WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    END IF;
    IF v_receipt.tool_name <> p_tool_name OR v_receipt.request_digest <> v_digest THEN
        RAISE EXCEPTION 'idempotency key % is already used for a different request', p_idempotency_key
            USING ERRCODE = 'CV009',
                  DETAIL = format('receipt %s, owner %s, tool %s', v_receipt.id, p_owner_id, v_receipt.tool_name);
    END IF;
    RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                        v_receipt.result_ref, false;
END;
$$;

COMMENT ON FUNCTION convo.begin_receipt(text, text, text, jsonb) IS
    'File a receipt (pending) before a route-initiated mutation; a repeat of the key returns the first row.';

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

        -- Effects as they stand (their event chains were checked above). The
        -- scope key is computed here (scope_key, this database's secret)
        -- from the creating call's input, unless erasure left none; the
        -- idempotency key is the document's, which may have been sent,
        -- except where nothing was sent (awaiting confirmation, rejected),
        -- where it is the scope key.
        INSERT INTO convo.tool_effects
        SELECT r.*
          FROM jsonb_array_elements(p_export -> 'effects') j (elem)
          LEFT JOIN (SELECT k.effect_id, k.decision,
                            convo_private.scope_key(CASE WHEN k.decision = 'rejected' THEN 'rejected' ELSE t.idempotency_scope END,
                                                    v_id, k.tool_call_id, k.fork_point_id, k.tool_name, m.parts -> k.ordinal -> 'input')
                                AS scope_key
                       FROM jsonb_populate_recordset(NULL::convo.tool_effect_calls, p_export -> 'tool_calls') k
                       JOIN jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m ON m.id = k.message_id
                       JOIN convo.tools t ON t.name = k.tool_name AND t.version = k.tool_version
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

        -- The record of earlier erasures, recorded by this transaction.
        INSERT INTO convo.erasures (owner_id, id, conversation_id, reason, erased_by, erased_at, import_id)
        SELECT r.owner_id, r.id, v_id, r.reason, r.erased_by, r.erased_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.erasures, p_export -> 'erasures') r;
        INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
        SELECT j.elem ->> 'owner_id', (j.elem ->> 'id')::uuid, p.place, p.rows_redacted
          FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
               LATERAL jsonb_to_recordset(j.elem -> 'places') p (place text, rows_redacted bigint);

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

-- ledger_problems: every ledger row of one conversation (NULL: of every
-- conversation) that the API could not have written, one row each, naming
-- the row and what is wrong with it:
--   a call's decision that does not follow from the tool version it was
--   checked against (replay for an effectful tool, a ledger decision for one
--   without effects), or that names another tool than its tool_use part;
--   a fork point that is not the call's (fork_point_of);
--   a reuse whose effect's scope key is not the one the call would compute
--   (a link across scopes);
--   an effect its creating call does not explain: another tool version, a
--   first state the decision does not give, a rejection without its 422, a
--   re-run that repeats no earlier call of the same tool and fork point on
--   another branch, arguments other than the call's input, an amount or
--   currency other than the registration reads from them (effect_money), a
--   scope key other than scope_key computes, a verdict of the schema other
--   than args_errors gives.
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
               l.tool_name, l.tool_version, p.tool_name AS part_tool, m.parts -> l.ordinal -> 'input' AS input,
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
         WHERE p_conversation_id IS NULL OR e.conversation_id = p_conversation_id)
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
     CROSS JOIN LATERAL (SELECT convo_private.fork_point_of(c.conversation_id, c.message_id) AS fork) f
     WHERE c.fork_point_id IS DISTINCT FROM f.fork
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('reuses effect %s, whose scope key is not the one the call computes (%s)', c.effect_id, c.scope)
      FROM calls c
      JOIN convo.tool_effects e ON e.conversation_id = c.conversation_id AND e.id = c.effect_id
     WHERE c.decision = 'reuse' AND NOT c.erased
       AND e.scope_key IS DISTINCT FROM convo_private.scope_key(c.scope, c.conversation_id, c.tool_call_id,
                                                                c.fork_point_id, c.tool_name, c.input)
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
                           e.conversation_id, e.by_call, e.by_fork, e.tool_name, e.by_input)
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
-- (effect_event).
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key: the call is linked to it.
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
-- Planned afresh for each call: a message of N calls grows the ledger
-- within one statement, and a plan cached while the tables were nearly
-- empty (a sequential scan) would make each call cost the calls before it.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := p_input;
    v_now       timestamptz := clock_timestamp();
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
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
        v_scope_key := convo_private.scope_key('rejected', p_conversation_id, p_tool_call_id, NULL, NULL, NULL);
    ELSE
        v_scope_key := convo_private.scope_key(v_tool.idempotency_scope, p_conversation_id, p_tool_call_id,
                                               v_fork, v_tool.name, v_input);
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = p_conversation_id AND e.scope_key = v_scope_key;
        IF FOUND THEN
            v_decision := 'reuse';
        ELSE
            -- Re-run candidates come from other messages at the same fork point
            -- (the calls of this very message are on its path by definition):
            -- two ranges of tool_effect_calls_fork_idx skip this message's
            -- calls, so N calls in one message cost N lookups, not N squared.
            -- A candidate on this message's path (an earlier call of the same
            -- agent turn) is no re-run: the path's segments are read once and
            -- each candidate's message looked up against them (is_on_segments),
            -- not walked again.
            SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_seg_branches, v_seg_depths
              FROM convo_private.path_segments(p_conversation_id, p_message_id) s;
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = p_conversation_id
               AND (l.fork_point_id = v_fork OR (v_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < p_message_id OR l.message_id > p_message_id)
               AND e.tool_name = p_tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_segments(p_conversation_id, l.message_id, v_seg_branches, v_seg_depths)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        SELECT * INTO v_money FROM convo_private.effect_money(v_input, v_tool.amount_arg, v_tool.currency_arg);
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, requested_at, deadline_at, settled_at, http_status, error_code)
        VALUES
            (p_conversation_id, v_id, v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE v_decision WHEN 'execute' THEN 'pending' WHEN 'confirm' THEN 'awaiting_confirmation' ELSE 'failed' END,
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

SELECT convo_private.apply_grants();

-- scope_key: the key under which a tool call is the same request as
-- another, by its tool's idempotency scope: tool_call (the call itself),
-- conversation_args (conversation, tool, canonical input) or fork_args (the
-- same and the fork point; NULL stands for the conversation); and a
-- rejected call's own key ('rejected': the call itself, never shared). Keyed
-- (keyed_digest) so that it outlives an erasure of the input. The one rule:
-- record_tool_call decides by it, import_conversation keys a restored
-- effect by it, and ledger_problems checks stored keys against it.
CREATE OR REPLACE FUNCTION convo_private.scope_key(
    p_scope           text,
    p_conversation_id uuid,
    p_tool_call_id    text,
    p_fork            uuid,
    p_tool_name       text,
    p_input           jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN p_scope || ':' || convo_private.keyed_digest(encode(sha256(convert_to(
        CASE p_scope
            WHEN 'tool_call' THEN p_conversation_id || '|' || p_tool_call_id
            WHEN 'rejected' THEN p_conversation_id || '|' || p_tool_call_id
            WHEN 'conversation_args' THEN p_conversation_id || '|' || p_tool_name || '|' || p_input::text
            WHEN 'fork_args' THEN p_conversation_id || '|' || coalesce(p_fork::text, 'conversation')
                                  || '|' || p_tool_name || '|' || p_input::text
        END, 'UTF8')), 'hex'));
END;
$$;

DROP FUNCTION convo_private.key_epoch;

DROP FUNCTION convo_private.fork_points;

-- Reverse the table changes here, below the objects.
DROP FUNCTION convo_private.scope_key(text, uuid, text, uuid, text, jsonb, int);

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
