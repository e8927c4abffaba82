-- 0043_one_trigger_list_one_write_entry: the package's triggers created from
-- one list (package_triggers, with each trigger's definition) by
-- create_triggers, which holds the clause that lets pgconvo's own code
-- through once, the triggers coming out as they were; and write_messages
-- takes its new messages as one array of convo_private.new_message, with
-- named arguments and defaults, where it took six parallel arrays.

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

-- Table changes, written by hand, go here, above the objects that use them.

-- package_triggers returns more columns: it is dropped, then created again.
DROP FUNCTION convo_private.package_triggers();

-- A new message for write_messages, which took each field as an array.
CREATE TYPE convo_private.new_message AS (
    id            uuid,
    parent_id     uuid,
    role          text,
    parts         jsonb,
    branch_reason text,
    created_at    timestamptz
);
COMMENT ON TYPE convo_private.new_message IS
    'A message for write_messages to add: its id, parent (NULL: a root), role, parts, the branch reason asked for and its time (NULL: now).';
DROP FUNCTION convo_private.write_messages(uuid, uuid, uuid[], uuid[], text[], jsonb[], text[], timestamptz[], uuid, uuid,
                                           text, text);

-- append_message: a child of the current head (a root if there is none), and
-- the head moves to it (reason 'append'), through write_messages. A repeat
-- with the same p_message_id is recognised before any other check and
-- returns the first result, writing nothing.
CREATE OR REPLACE FUNCTION convo.append_message(
    p_conversation_id uuid,
    p_role            text,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_message_id      uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
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
AS $$
DECLARE
    v_head uuid := convo_private.lock_conversation(p_conversation_id);
    v_id   uuid := coalesce(p_message_id, gen_random_uuid());
BEGIN
    IF p_role IS NULL OR p_parts IS NULL THEN
        RAISE EXCEPTION 'p_role and p_parts are required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF p_message_id IS NOT NULL
       AND convo_private.is_retry(p_conversation_id, p_message_id, p_role, p_parts, NULL, false) THEN
        RETURN p_message_id;
    END IF;
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head,
        p_messages => ARRAY[(v_id, v_head, p_role, p_parts, NULL, NULL)::convo_private.new_message],
        p_head => v_id, p_head_reason => 'append', p_moved_by => p_moved_by);
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.append_message(uuid, text, jsonb, uuid, uuid, text) IS
    'Append a message under the current head and move the head to it; compare-and-set with p_expected_head, retry-safe by p_message_id.';

-- apply_receipt: pending, with validated arguments, to applied. Call it in
-- the same transaction as the mutation itself to make the two atomic: both
-- commit, or neither does. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.apply_receipt(p_receipt_id uuid, p_result_ref text, p_http_status int DEFAULT 201)
RETURNS void
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
AS $$
BEGIN
    PERFORM convo_private.settle_receipt(p_receipt_id, 'applied', p_http_status, p_result_ref);
END;
$$;

COMMENT ON FUNCTION convo.apply_receipt(uuid, text, int) IS
    'Mark a pending, validly filled receipt applied; run it in the mutation''s own transaction to make the two atomic.';

-- complete_generation: streaming to completed. The answer becomes an
-- assistant child of the prompt message in the same transaction
-- (regenerate if the prompt already has an assistant child, branch if it has
-- other children); the head moves to it only if the head is where it was at
-- begin_generation, so a late answer does not yank a tab that moved on.
-- An exact repeat returns the same message.
CREATE OR REPLACE FUNCTION convo.complete_generation(
    p_conversation_id uuid,
    p_generation_id   uuid,
    p_parts           jsonb,
    p_usage           jsonb DEFAULT '{}',
    p_finish_reason   text DEFAULT NULL)
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
AS $$
DECLARE
    v_head       uuid := convo_private.lock_conversation(p_conversation_id);
    v_generation convo.generations := convo_private.generation_ref(p_conversation_id, p_generation_id);
    v_message    uuid := gen_random_uuid();
    v_reason     text;
    v_finished   timestamptz;
BEGIN
    IF p_parts IS NULL OR p_usage IS NULL OR jsonb_typeof(p_usage) <> 'object' THEN
        RAISE EXCEPTION 'p_parts and p_usage (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF v_generation.state = 'completed' AND v_generation.usage::text = p_usage::text
       AND v_generation.finish_reason IS NOT DISTINCT FROM p_finish_reason
       AND (SELECT m.parts FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_generation.message_id)::text = p_parts::text THEN
        RETURN v_generation.message_id;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation completes', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    PERFORM convo_private.check_size('p_usage', p_usage, convo.max_detail_bytes());
    IF length(p_finish_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_finish_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, generation %s', p_conversation_id, p_generation_id);
    END IF;
    -- 'regenerate' when the prompt already has an answer; write_messages
    -- makes any other later child a 'branch'.
    v_reason := CASE WHEN EXISTS (SELECT 1 FROM convo.messages c
                                   WHERE c.conversation_id = p_conversation_id
                                     AND c.parent_id = v_generation.prompt_message_id
                                     AND c.role = 'assistant') THEN 'regenerate' END;
    -- The head follows only if it is where it was at begin_generation; a
    -- head moved away and back again counts as unmoved: the user is looking
    -- at the prompt the answer is for.
    PERFORM convo_private.write_messages(p_conversation_id, v_head,
        p_messages => ARRAY[(v_message, v_generation.prompt_message_id, 'assistant', p_parts, v_reason,
                             NULL)::convo_private.new_message],
        p_head => CASE WHEN v_head IS NOT DISTINCT FROM v_generation.head_at_begin THEN v_message END,
        p_head_reason => CASE WHEN v_reason = 'regenerate' THEN 'regenerate' ELSE 'append' END);
    v_finished := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'completed', message_id = v_message, usage = p_usage, finish_reason = p_finish_reason,
           finished_at = v_finished
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
    RETURN v_message;
END;
$$;

COMMENT ON FUNCTION convo.complete_generation(uuid, uuid, jsonb, jsonb, text) IS
    'Complete a streaming generation: its answer becomes a child of the prompt; the head follows only if it has not moved since begin.';

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
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    PERFORM convo_private.check_sidebar(p_owner_id, p_limit, p_before, p_archived, p_before_id);
    -- One query for every page: the first page's key is past every row
    -- ('infinity'), and p_before alone is before every row of that time
    -- (the nil uuid), so one range scan serves all three.
    RETURN QUERY
    SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
      FROM convo.conversations c
     WHERE c.owner_id = p_owner_id AND c.archived = p_archived
       AND (c.last_activity_at, c.id) < (coalesce(p_before, 'infinity'),
                                         coalesce(p_before_id, CASE WHEN p_before IS NULL THEN 'ffffffff-ffff-ffff-ffff-ffffffffffff'
                                                                    ELSE '00000000-0000-0000-0000-000000000000' END::uuid))
     ORDER BY c.last_activity_at DESC, c.id DESC
     LIMIT p_limit;
END;
$$;

COMMENT ON FUNCTION convo.conversations(text, integer, timestamp with time zone, boolean, uuid) IS
    'An owner''s conversations, latest activity first, keyset-paged (p_before, p_before_id: the last row of the previous page): a chat sidebar.';

-- fail_receipt: pending to failed, with an HTTP-style status and an error
-- code (the fill failed upstream, the mutation was refused, ...). An exact
-- repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.fail_receipt(p_receipt_id uuid, p_http_status int, p_error_code text)
RETURNS void
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
AS $$
BEGIN
    PERFORM convo_private.settle_receipt(p_receipt_id, 'failed', p_http_status, p_error_code);
END;
$$;

COMMENT ON FUNCTION convo.fail_receipt(uuid, int, text) IS 'Mark a pending receipt failed with an HTTP-style status and error code.';

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

        INSERT INTO convo.conversations (id, owner_id, metadata, created_at, title, archived, last_activity_at)
        VALUES (v_id, p_owner_id, v_conv -> 'metadata', (v_conv ->> 'created_at')::timestamptz, v_conv ->> 'title',
                (v_conv ->> 'archived')::boolean, (v_conv ->> 'last_activity_at')::timestamptz)
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
        SELECT array_agg((m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at)::convo_private.new_message
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

-- move_head: a branch switch: the head names any message of the conversation,
-- moved through write_messages (no new message). p_reason is free text in
-- lower snake case; 'create', 'import' and 'direct_update' are kept for the
-- database's own log rows (each begins a log, or marks a change outside the
-- API, and a restore reads them so). Moving to where the head is writes nothing.
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
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_reason IS NULL OR p_reason !~ '^[a-z][a-z0-9_]{0,62}$' OR p_reason IN ('create', 'import', 'direct_update') THEN
        RAISE EXCEPTION 'invalid head-move reason %', coalesce(quote_literal(p_reason), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id),
                  HINT = 'A reason is 1 to 63 characters of a-z, 0-9 and _, starting with a letter; create, import and direct_update are reserved.';
    END IF;
    v_head := convo_private.lock_conversation(p_conversation_id);
    PERFORM convo_private.message_ref(p_conversation_id, p_message_id);
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head,
        p_head => p_message_id, p_head_reason => p_reason, p_moved_by => p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';

-- add_sibling: what edit_and_resend and regenerate share: a new message
-- beside an existing one (same parent), the head moved to it, through
-- write_messages. No existing row changes; the old subtree simply stops
-- being on the path.
CREATE OR REPLACE FUNCTION convo_private.add_sibling(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid,
    p_new_message_id  uuid,
    p_moved_by        text,
    p_role            text,
    p_branch_reason   text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head     uuid := convo_private.lock_conversation(p_conversation_id);
    v_original convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
    v_id       uuid := coalesce(p_new_message_id, gen_random_uuid());
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id);
    END IF;
    IF p_new_message_id IS NOT NULL
       AND convo_private.is_retry(p_conversation_id, p_new_message_id, p_role, p_parts, v_original.parent_id, true) THEN
        RETURN p_new_message_id;
    END IF;
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    IF v_original.role <> p_role THEN
        RAISE EXCEPTION '% takes a message of role %; message % has role %',
                CASE p_branch_reason WHEN 'user_edit' THEN 'edit_and_resend' ELSE 'regenerate' END,
                p_role, p_message_id, v_original.role
            USING ERRCODE = 'CV004', DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head,
        p_messages => ARRAY[(v_id, v_original.parent_id, p_role, p_parts, p_branch_reason, NULL)::convo_private.new_message],
        p_head => v_id, p_head_reason => p_branch_reason, p_moved_by => p_moved_by);
    RETURN v_id;
END;
$$;

-- conversations_guard: of a conversation only the head, the title and the
-- archive state may change (each logged), its last activity only with its
-- head's moves through the API, and its metadata only by erasure (pgconvo's
-- erase_content): its id, owner and creation time are fixed, and a head once
-- set is never unset (the head always names a message). It runs for every UPDATE that changes a fixed
-- column or unsets the head, and for every UPDATE outside pgconvo's code
-- (its WHEN, from package_triggers: not the owner role, or the owner role
-- only because a session SET ROLE or SET SESSION AUTHORIZATION to it), so
-- that past the fixed columns' checks the UPDATE is an outsider's.
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
    -- Past the checks above, the trigger's WHEN let this UPDATE through
    -- only because it comes from outside pgconvo's code.
    IF NEW.last_activity_at IS DISTINCT FROM OLD.last_activity_at THEN
        RAISE EXCEPTION 'a conversation''s last_activity_at moves only with its head, through the API'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user);
    END IF;
    IF NEW.metadata::text IS DISTINCT FROM OLD.metadata::text THEN
        RAISE EXCEPTION 'convo.conversations is append-only: its metadata changes only by erasure'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user),
                  HINT = 'Content is removed only by convo.erase_conversation or convo.erase_owner.';
    END IF;
    RETURN NEW;
END;
$$;

-- create_triggers: creates (or re-creates) every trigger of
-- package_triggers, each ENABLE ALWAYS (a view's as views allow), so that
-- neither session_replication_role nor a plain ENABLE skips it. It holds
-- the one clause that lets pgconvo's own code through, which a trigger's
-- WHEN names as %s: current_user the owner role (a SECURITY DEFINER
-- function of pgconvo's) with neither a SET ROLE nor a SET SESSION
-- AUTHORIZATION to it behind it. A migration that changes the list runs
-- it; invoker rights, as the migrating role.
CREATE OR REPLACE FUNCTION convo_private.create_triggers()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_outside constant text :=
        'current_user <> ''convo_owner'' OR current_setting(''role'') = ''convo_owner'' OR session_user = ''convo_owner''';
    v record;
BEGIN
    FOR v IN SELECT t.*, c.relkind FROM convo_private.package_triggers() t
               JOIN pg_class c ON c.oid = format('convo.%I', t.table_name)::regclass LOOP
        EXECUTE format('CREATE OR REPLACE TRIGGER %I %s %s ON convo.%I FOR EACH %s %sEXECUTE FUNCTION convo_private.%s',
                       v.trigger_name, v.timing, v.events, v.table_name, v.level,
                       CASE WHEN v.when_clause IS NOT NULL THEN format('WHEN (%s) ', format(v.when_clause, v_outside)) ELSE '' END,
                       v.function_call);
        IF v.relkind <> 'v' THEN
            EXECUTE format('ALTER TABLE convo.%I ENABLE ALWAYS TRIGGER %I', v.table_name, v.trigger_name);
        END IF;
    END LOOP;
END;
$$;

-- import_tree: the shared second half of import_chatgpt, import_openwebui
-- and import_librechat, once the source is checked: the tree (docs/importing.md: "The tree",
-- "Times", "Sibling order and branch reasons", "The head", "Nothing is
-- lost", "Repeats") written as a new conversation, or merged into the one
-- this owner imported from the same source before. Imported messages are
-- the nodes whose message is an object; each hangs under its nearest
-- imported ancestor (import_walk) with its original time, or the import's
-- where the source's is later (kept in the node); siblings are inserted in
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
-- 'import' included, names that record (import_id).
-- A message's id is its content's: the digest of its parent's id (the
-- conversation's for a root), its node key, role, parts and source time.
-- So the same node under the same parent is the same message in every
-- import, and a node that differs is another message (a sibling): a merge
-- is a set union, whose result does not depend on the order of the
-- imports. A merge writes only the messages that are not there yet, and
-- moves the head to the import's when the conversation has none or the
-- import's is later (time, then id): the head ends at the latest head any
-- import named, in any order. A merge that would write nothing writes
-- nothing, not even its record. Every step is a pass or a hash join over
-- the nodes: linear.
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
    v_conv       uuid;
    v_merge      boolean;
    v_old_head   uuid;
    v_keys       text[];
    v_parent     int[];
    v_imported   boolean[];
    v_time       timestamptz[];
    v_dropped    jsonb;
    v_imp        int[];
    v_depth      int[];
    v_at         timestamptz[];
    v_pos        int[];        -- a node's position among the messages (by node index)
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
    m_src        timestamptz[];
    m_node       jsonb[];
    m_new        boolean[];
    v_mismatches bigint;
    v_i          int;
    v_p          int;
    v_head_idx   int;
    v_head       uuid;
    v_move       boolean;
    v_fallback   text;
    v_bad        record;
    v_metadata   jsonb;
    v_title      text;         -- the export's title, cut to max_title_length
    v_created    timestamptz;
BEGIN
    -- The nodes as arrays in key order, each parent as an index (0: none),
    -- with the source's own times (a time after the import is clamped below,
    -- where it is stored: the id is the source's, the same in every import).
    WITH n AS MATERIALIZED (SELECT * FROM convo_private.import_nodes(p_source, p_mapping))
    SELECT coalesce(array_agg(n.key ORDER BY n.idx), '{}'),
           coalesce(array_agg(coalesce(p.idx, 0) ORDER BY n.idx), '{}'),
           coalesce(array_agg(jsonb_typeof(n.message) IS NOT DISTINCT FROM 'object' ORDER BY n.idx), '{}'),
           coalesce(array_agg(n.at ORDER BY n.idx), '{}'),
           coalesce(jsonb_object_agg(n.key, n.node) FILTER (WHERE jsonb_typeof(n.message) IS DISTINCT FROM 'object'), '{}')
      INTO v_keys, v_parent, v_imported, v_time, v_dropped
      FROM n LEFT JOIN n p ON p.key = n.parent_key;

    SELECT * INTO v_imp, v_depth, v_at
      FROM convo_private.import_walk(v_keys, v_parent, v_imported, v_time, p_conv_time, p_where);

    -- The conversation this owner imported from the same source before (a
    -- merge), else a new one under p_conversation_id.
    SELECT i.conversation_id INTO v_conv FROM convo.imports i
     WHERE i.owner_id = p_owner_id AND i.format = p_source AND i.source_key = p_source_key AND i.import_id IS NULL
     LIMIT 1;
    v_merge := FOUND;
    v_conv := coalesce(v_conv, p_conversation_id);

    -- The messages: role and parts (given the imported parent), sibling
    -- order and branch reason; and the children lists' disagreements.
    WITH n AS MATERIALIZED (
        SELECT n.*, x.imp, x.depth, x.at AS src_at
          FROM convo_private.import_nodes(p_source, p_mapping) n
          JOIN unnest(v_imp, v_depth, v_at) WITH ORDINALITY AS x (imp, depth, at, idx) ON x.idx = n.idx
    ), listed AS MATERIALIZED (
        SELECT n.key AS parent_key, c.child, min(c.ord) AS ord
          FROM n, jsonb_array_elements_text(CASE WHEN jsonb_typeof(n.children) = 'array' THEN n.children ELSE '[]' END)
                  WITH ORDINALITY AS c (child, ord)
         GROUP BY n.key, c.child
    ), m AS MATERIALIZED (
        -- A source time after the import is the import's (the node keeps
        -- the source's): nothing here is dated ahead of when it was written.
        SELECT n.idx, n.imp, n.key, n.node, n.depth, n.src_at, least(coalesce(n.src_at, v_now), v_now) AS created_at,
               l.ord, p.key AS imp_parent_key,
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
           array_agg(o.role ORDER BY o.depth, o.imp, o.sib),
           array_agg(CASE WHEN o.sib = 1 THEN NULL
                          WHEN o.role = 'user' AND o.first_role = 'user' THEN 'user_edit'
                          WHEN o.role = 'assistant' AND o.first_role = 'assistant' THEN 'regenerate'
                          ELSE 'branch' END ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.rp -> 'parts' ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.created_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.src_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.node ORDER BY o.depth, o.imp, o.sib),
           -- (A LibreChat message whose children were not read, every one of
           -- a flat export, lists nothing to disagree with.)
           (SELECT count(*)
              FROM (SELECT c.parent_key, c.key FROM n c JOIN n p ON p.key = c.parent_key
                     WHERE p_source <> 'librechat' OR p.children IS NOT NULL) a
              FULL JOIN listed b ON b.parent_key = a.parent_key AND b.child = a.key
             WHERE a.key IS NULL OR b.child IS NULL)
      INTO m_idx, m_imp, m_key, m_role, m_reason, m_parts, m_at, m_src, m_node, v_mismatches
      FROM o;

    -- Each message's id, parents first (they come first): the keyed digest
    -- of its parent's id, its node key, role, parts and source time (none
    -- where it would be the import's). Keyed, as every digest of content
    -- is: erasure keeps the id, which must not answer a guess of the parts.
    v_pos := array_fill(0, ARRAY[coalesce(cardinality(v_keys), 0)]);
    m_id := '{}';
    m_parent := '{}';
    FOR i IN 1 .. coalesce(cardinality(m_idx), 0) LOOP
        v_pos[m_idx[i]] := i;
        v_p := CASE WHEN m_imp[i] = 0 THEN 0 ELSE v_pos[m_imp[i]] END;
        m_parent[i] := CASE WHEN v_p > 0 THEN m_id[v_p] END;
        m_id[i] := left(convo_private.keyed_digest(encode(sha256(convert_to(jsonb_build_array(
                       coalesce(m_parent[i], v_conv), m_key[i], m_role[i], m_parts[i], extract(epoch FROM m_src[i]))::text,
                       'UTF8')), 'hex')), 32)::uuid;
    END LOOP;

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
        v_head := m_id[v_pos[v_head_idx]];
    ELSE
        SELECT x.id INTO v_head
          FROM unnest(m_id, m_idx, m_at, m_key) AS x (id, idx, at, key)
         WHERE NOT EXISTS (SELECT 1 FROM unnest(m_imp) AS c (imp) WHERE c.imp = x.idx)
         ORDER BY x.at DESC, x.key COLLATE "C" DESC
         LIMIT 1;
        v_fallback := CASE WHEN v_head IS NOT NULL THEN 'latest_leaf' END;
    END IF;

    IF NOT v_merge THEN
        v_metadata := jsonb_build_object('import', p_metadata || jsonb_build_object(
            'dropped_nodes', v_dropped, 'children_mismatches', v_mismatches, 'head_fallback', v_fallback));
        IF octet_length(v_metadata::text) > convo.max_metadata_bytes() THEN
            RAISE EXCEPTION 'the import''s conversation metadata is larger than % bytes', convo.max_metadata_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('%s: metadata of %s bytes', p_where, octet_length(v_metadata::text));
        END IF;

        v_title := left(convo_private.nonempty_text(p_metadata -> 'title'), convo_private.max_title_length());
        v_created := least(coalesce(p_conv_time, (SELECT min(a) FROM unnest(m_at) AS a), v_now), v_now);
        INSERT INTO convo.conversations (id, owner_id, metadata, created_at, title, last_activity_at)
        VALUES (v_conv, p_owner_id, v_metadata, v_created, v_title, v_created)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            -- An import of this source that another session committed
            -- meanwhile (merged into, under the same id), or an earlier
            -- import of it that erasure has left without its source key.
            PERFORM FROM convo.imports i
             WHERE i.owner_id = p_owner_id AND i.format = p_source AND i.source_key = p_source_key AND i.import_id IS NULL
               AND i.conversation_id = v_conv;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'conversation % was imported before from this source and erased', v_conv
                    USING ERRCODE = 'CV009', DETAIL = p_where,
                          HINT = 'An erased import is not imported again under its id; import it under another owner.';
            END IF;
            v_merge := true;
        END IF;
    END IF;

    IF v_merge THEN
        -- A merge: only the messages not there yet (a node that is there has
        -- its ancestors there too, so what is new hangs under what is there
        -- or under new messages before it), a later sibling's branch reason
        -- by the first one stored (not the import's first, which may be a
        -- later stored one); the head moves to the import's when the
        -- conversation has none or the import's is later (time, then id).
        v_old_head := convo_private.lock_conversation(v_conv);
        -- A conversation imported before messages had these ids (version 40
        -- and earlier: md5 of the conversation and the node key) would take
        -- the whole tree again beside its own: refused, as it was then.
        IF EXISTS (SELECT 1 FROM convo.import_origins o
                    WHERE o.conversation_id = v_conv AND o.message_id = md5(v_conv::text || ':' || o.node_key)::uuid) THEN
            RAISE EXCEPTION 'source % was imported before for owner % with other content', p_source_key, p_owner_id
                USING ERRCODE = 'CV009', DETAIL = format('%s; imported before as conversation %s', p_where, v_conv),
                      HINT = 'It was imported before merges (version 40 and earlier), so it is not merged; '
                             'import it under another owner to keep both.';
        END IF;
        SELECT array_agg(s.id IS NULL ORDER BY x.i),
               array_agg(CASE WHEN s.id IS NOT NULL OR f.role IS NULL THEN x.reason
                              WHEN x.role = 'user' AND f.role = 'user' THEN 'user_edit'
                              WHEN x.role = 'assistant' AND f.role = 'assistant' THEN 'regenerate'
                              ELSE 'branch' END ORDER BY x.i)
          INTO m_new, m_reason
          FROM unnest(m_id, m_parent, m_role, m_reason) WITH ORDINALITY AS x (id, parent_id, role, reason, i)
          LEFT JOIN convo.messages s ON s.conversation_id = v_conv AND s.id = x.id
          -- (One probe of messages_sibling_key each: an OR of the parent's
          -- two cases read every message of the conversation per message.)
          LEFT JOIN LATERAL (SELECT f.role FROM convo.messages f
                              WHERE s.id IS NULL AND x.parent_id IS NULL
                                AND f.conversation_id = v_conv AND f.parent_id IS NULL AND f.sibling_index = 1
                             UNION ALL
                             SELECT f.role FROM convo.messages f
                              WHERE s.id IS NULL
                                AND f.conversation_id = v_conv AND f.parent_id = x.parent_id AND f.sibling_index = 1) f ON true;
        v_move := v_head IS NOT NULL AND (v_old_head IS NULL OR coalesce((
            -- (m_at is by message position, as m_id.)
            SELECT (coalesce(h.created_at, m_at[array_position(m_id, v_head)]), v_head)
                   > (o.created_at, o.id)
              FROM convo.messages o LEFT JOIN convo.messages h ON h.conversation_id = v_conv AND h.id = v_head
             WHERE o.conversation_id = v_conv AND o.id = v_old_head), false));
        IF NOT v_move AND NOT coalesce(true = ANY (m_new), false) THEN
            RETURN v_conv;
        END IF;
        SELECT array_agg(x.id ORDER BY x.i), array_agg(x.parent_id ORDER BY x.i), array_agg(x.role ORDER BY x.i),
               array_agg(x.parts ORDER BY x.i), array_agg(x.reason ORDER BY x.i), array_agg(x.at ORDER BY x.i),
               array_agg(x.key ORDER BY x.i), array_agg(x.node ORDER BY x.i)
          INTO m_id, m_parent, m_role, m_parts, m_reason, m_at, m_key, m_node
          FROM unnest(m_id, m_parent, m_role, m_parts, m_reason, m_at, m_key, m_node, m_new)
               WITH ORDINALITY AS x (id, parent_id, role, parts, reason, at, key, node, new, i)
         WHERE x.new;
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
        VALUES (v_conv, v_import, p_owner_id, p_source, p_source_key, p_digest);
        INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
        SELECT v_conv, x.id, p_source, x.key, x.node
          FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
        PERFORM convo_private.write_messages(v_conv, v_old_head, convo_private.new_messages(m_id, m_parent, m_role, m_parts,
                                                                                            m_reason, m_at),
                                             p_import_id => v_import, p_head => CASE WHEN v_move THEN v_head END,
                                             p_head_reason => 'import');
        RETURN v_conv;
    END IF;

    INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
    VALUES (v_conv, v_import, p_owner_id, p_source, p_source_key, p_digest);
    -- The export's title is the conversation's, logged as the import's.
    IF v_title IS NOT NULL THEN
        PERFORM convo_private.log_change(v_conv, 'title', NULL, v_title, convo_private.caller(), v_import);
    END IF;

    -- Origins (their foreign key is deferred), then the messages through
    -- write_messages, parents before children, siblings in order, with
    -- their original times and the import's record (so no ledger row),
    -- and the head's one move, 'import'.
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT v_conv, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    PERFORM convo_private.write_messages(v_conv, NULL, convo_private.new_messages(m_id, m_parent, m_role, m_parts, m_reason,
                                                                                  m_at),
                                         p_import_id => v_import, p_head => v_head, p_head_reason => 'import');
    RETURN v_conv;
END;
$$;

-- new_conversation: the conversation row of create_conversation, whose
-- owner hold_new_owner has checked and holds, with id p_conversation_id
-- (given by the caller when p_given: then a taken id is a retry, the same
-- call returning it, anything else CV009); with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
CREATE OR REPLACE FUNCTION convo_private.new_conversation(
    p_conversation_id uuid,
    p_owner_id        text,
    p_system_prompt   text,
    p_metadata        jsonb,
    p_given           boolean)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_existing convo.conversations;
    v_taken    boolean := false;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
BEGIN
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'p_metadata must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF octet_length(p_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s: %s bytes', p_owner_id, octet_length(p_metadata::text));
    END IF;

    -- A given id that is taken is a retry: read first without a lock, so
    -- that another owner's row is never locked or waited for (an UPDATE in
    -- progress would hold up an INSERT ... ON CONFLICT on it).
    IF p_given THEN
        PERFORM FROM convo.conversations c WHERE c.id = p_conversation_id;
        v_taken := FOUND;
    END IF;
    IF NOT v_taken THEN
        INSERT INTO convo.conversations (id, owner_id, metadata)
        VALUES (p_conversation_id, p_owner_id, p_metadata)
        ON CONFLICT (id) DO NOTHING;
        v_taken := NOT FOUND; -- a concurrent call with the same id came first
    END IF;
    IF v_taken THEN
        -- The same owner, metadata and system prompt return the first
        -- result; anything else, another owner's id included, is CV009.
        -- Locked only if it is this owner's.
        SELECT * INTO v_existing FROM convo.conversations c
         WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id
           FOR NO KEY UPDATE;
        -- The system prompt is the message the 'create' move named, whatever
        -- was appended since; compared as text, like the metadata.
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata::text IS DISTINCT FROM p_metadata::text
           OR (SELECT m.parts FROM convo.conversation_head_log l
                 JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.head_message_id
                WHERE l.conversation_id = p_conversation_id AND l.reason = 'create')::text IS DISTINCT FROM v_parts::text THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', p_conversation_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', p_conversation_id);
        END IF;
        RETURN p_conversation_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        PERFORM convo_private.write_messages(p_conversation_id, NULL,
            p_messages => ARRAY[(v_root, NULL, 'system', v_parts, NULL, NULL)::convo_private.new_message],
            p_head => v_root, p_head_reason => 'create');
    END IF;
    RETURN p_conversation_id;
END;
$$;

-- settle_receipt: apply_receipt's and fail_receipt's one step, told apart
-- by p_status: a pending receipt to 'applied' (its arguments valid, with
-- a result reference, p_ref, and a 2xx status) or to 'failed' (an error
-- code, p_ref, and a 4xx or 5xx status), found among the session owner's
-- receipts (receipt_ref). An exact repeat is a no-op; a receipt settled
-- otherwise is CV006.
CREATE OR REPLACE FUNCTION convo_private.settle_receipt(
    p_receipt_id  uuid,
    p_status      text,
    p_http_status int,
    p_ref         text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_applied boolean := p_status = 'applied';
    v_ref     text := CASE WHEN v_applied THEN 'p_result_ref' ELSE 'p_error_code' END;
    v_now     timestamptz;  -- a value, not clock_timestamp() in the UPDATE: Citus refuses a volatile function there
BEGIN
    IF p_ref IS NULL OR p_ref = '' OR p_http_status IS NULL
       OR v_applied AND p_http_status NOT BETWEEN 200 AND 299
       OR NOT v_applied AND p_http_status NOT BETWEEN 400 AND 599 THEN
        RAISE EXCEPTION '% and a % p_http_status are required', v_ref, (CASE WHEN v_applied THEN '2xx' ELSE '4xx or 5xx' END)
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_ref) > convo.max_ref_length() THEN
        RAISE EXCEPTION '% is longer than % characters', v_ref, convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = p_status AND v_receipt.http_status = p_http_status
       AND (CASE WHEN v_applied THEN v_receipt.result_ref ELSE v_receipt.error_code END) = p_ref THEN
        RETURN;
    END IF;
    IF v_applied AND (v_receipt.status <> 'pending' OR v_receipt.arguments_valid IS NOT TRUE) THEN
        RAISE EXCEPTION 'receipt % is % with % arguments: only a pending receipt with valid arguments is applied',
                p_receipt_id, v_receipt.status,
                CASE v_receipt.arguments_valid WHEN true THEN 'valid' WHEN false THEN 'invalid' ELSE 'no' END
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    IF v_receipt.status <> 'pending' THEN
        RAISE EXCEPTION 'receipt % is %: only a pending receipt fails', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = p_status, http_status = p_http_status, settled_at = v_now,
           result_ref = CASE WHEN v_applied THEN p_ref ELSE r.result_ref END,
           error_code = CASE WHEN v_applied THEN r.error_code ELSE p_ref END
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, p_status, v_applied OR v_receipt.arguments IS NOT NULL);
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
--   'branch' for a later child) and time (NULL: now); the import writing
--   them (NULL: none), which keeps their times and writes no ledger row
--   (and, a restore, may hold an erased attachment); the head to move to,
--   why and by whom (p_head NULL: the head stays).
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
           array_agg(m.parts ORDER BY m.n), array_agg(m.branch_reason ORDER BY m.n), array_agg(m.created_at ORDER BY m.n)
      INTO v_ids, v_parents, v_roles, v_parts, v_reasons, v_times
      FROM unnest(p_messages) WITH ORDINALITY AS m (id, parent_id, role, parts, branch_reason, created_at, n);
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
                                    parts, created_at, import_id)
        SELECT p_conversation_id, x.id, x.parent_id, x.role, x.reason, x.depth, x.sib, x.branch, x.parts,
               coalesce(x.at, v_now), p_import_id
          FROM unnest(v_ids, v_parents, v_roles, v_reason, v_depth, v_sib, v_branch, v_parts, v_times)
               WITH ORDINALITY AS x (id, parent_id, role, reason, depth, sib, branch, parts, at, i)
         ORDER BY x.i;

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
               last_activity_at = CASE WHEN p_import_id IS NULL OR v_times IS NULL THEN v_now
                                       ELSE coalesce((SELECT max(t) FROM unnest(v_times) AS t), v_now) END
         WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_head_move(p_conversation_id, p_head, p_old_head, p_head_reason, p_moved_by, p_import_id);
    END IF;
END;
$$;

-- new_messages: write_messages' new messages from arrays of their fields,
-- position for position (the imports build a tree's messages that way).
CREATE OR REPLACE FUNCTION convo_private.new_messages(
    p_ids     uuid[],
    p_parents uuid[],
    p_roles   text[],
    p_parts   jsonb[],
    p_reasons text[],
    p_times   timestamptz[])
RETURNS convo_private.new_message[]
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(array_agg((m.id, m.parent_id, m.role, m.parts, m.reason, m.created_at)::convo_private.new_message
                              ORDER BY m.n), '{}')
      FROM unnest(p_ids, p_parents, p_roles, p_parts, p_reasons, p_times) WITH ORDINALITY
           AS m (id, parent_id, role, parts, reason, created_at, n);
END;

-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), the one list they are created from
-- (create_triggers): table, name, what it guards, when it fires, the
-- function it runs and its WHEN clause, in which %s stands for the one
-- clause that lets pgconvo's own code through (create_triggers holds it).
-- What each guards: append_only (refuse_change, refuse_forgery), head_log
-- (the conversation's guards and the logging of direct head, title and
-- archive updates), rule (the tree's and the ledger's guards, the state
-- machines) and row_security (a role row-level security binds refused
-- before the guards that run as the owner role read a row for it). Each
-- table's triggers are numbered in the order they fire (PostgreSQL fires
-- the triggers of one timing, event and level by name): 05 whom row-level
-- security binds, 10 and 11 who may write and what a new or changed row may
-- hold, 20 what a row must be (or, after the write, its log), 30 an UPDATE
-- refused or logged, 90 append-only. self_check requires each present and
-- ENABLE ALWAYS (a view's are enabled as views allow), and no other trigger
-- on the package's tables; docs/guide.md's table of them is written from
-- this list (cmd/apidocs).
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text, timing text, events text, level text,
               function_call text, when_clause text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards, t.timing, t.events, t.level, t.function_call, t.when_clause
      FROM (VALUES
        -- conversations_05_row_security: a role row-level security binds is refused (42501,
        -- refuse_row_security_bound) before the guards, which run as the owner role, read any row for it;
        -- pgconvo's own writes skip it in its WHEN.
        ('conversations', 'conversations_05_row_security', 'row_security', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_row_security_bound()', '%s'),
        -- conversations_10_guard: id, owner and creation time never change, a head once set is never unset,
        -- and outside pgconvo's code metadata never changes (erasure is pgconvo's). pgconvo's own head moves
        -- skip it in its WHEN.
        ('conversations', 'conversations_10_guard', 'head_log', 'BEFORE', 'UPDATE', 'ROW', 'conversations_guard()', 'OLD.id IS DISTINCT FROM NEW.id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.created_at IS DISTINCT FROM NEW.created_at OR (OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL) OR %s'),
        -- conversations_11_new_guard: a conversation inserted outside pgconvo's code is what
        -- create_conversation would write; pgconvo's own inserts skip it in its WHEN.
        ('conversations', 'conversations_11_new_guard', 'head_log', 'BEFORE', 'INSERT', 'ROW', 'conversations_new_guard()', '%s'),
        -- conversations_12_head_guard: a head moved outside pgconvo's code names a message of its own
        -- conversation, in replica mode too (which skips the foreign key), and every update outside pgconvo's
        -- code is the writer's owner's; pgconvo's own updates skip it in its WHEN.
        ('conversations', 'conversations_12_head_guard', 'head_log', 'BEFORE', 'UPDATE', 'ROW', 'conversations_head_guard()', '%s'),
        -- conversations_20_log_direct: a head moved outside pgconvo's code (a direct UPDATE) writes exactly
        -- one head-log row, direct_update by the caller, in the same transaction; pgconvo's own moves log
        -- themselves (log_head_move).
        ('conversations', 'conversations_20_log_direct', 'head_log', 'AFTER', 'UPDATE', 'ROW', 'log_direct_head_move()', 'OLD.head_message_id IS DISTINCT FROM NEW.head_message_id AND (%s)'),
        -- conversations_21_log_direct_change: a title or archive state changed outside pgconvo's code (a
        -- direct UPDATE) is logged in the change log, by the caller, in the same transaction; pgconvo's own
        -- changes log themselves (log_change).
        ('conversations', 'conversations_21_log_direct_change', 'head_log', 'AFTER', 'UPDATE', 'ROW', 'log_direct_change()', '(OLD.title IS DISTINCT FROM NEW.title OR OLD.archived IS DISTINCT FROM NEW.archived) AND (%s)'),
        -- conversations_90_no_delete: conversations are never deleted, by any role.
        ('conversations', 'conversations_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- conversation_changes_10_no_forgery: only pgconvo's code (or a superuser) writes the change log, so a
        -- change reaches it only as it happened.
        ('conversation_changes', 'conversation_changes_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- conversation_changes_30_no_update: outside pgconvo's code a change row is never updated; pgconvo's
        -- only update of one is erasure's redaction of a title.
        ('conversation_changes', 'conversation_changes_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (titles change only by erasure)'')', '%s'),
        -- conversation_changes_90_append_only: change rows are never deleted, by any role.
        ('conversation_changes', 'conversation_changes_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- messages_05_row_security: a role row-level security binds is refused (42501,
        -- refuse_row_security_bound) before the guards, which run as the owner role, read any row for it;
        -- pgconvo's own writes skip it in its WHEN.
        ('messages', 'messages_05_row_security', 'row_security', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_row_security_bound()', '%s'),
        -- messages_20_guard: a message inserted outside pgconvo's code must be placed as the tree places it,
        -- with well-formed parts (messages_guard); pgconvo's own writes (write_messages) skip it in its WHEN.
        ('messages', 'messages_20_guard', 'rule', 'BEFORE', 'INSERT', 'ROW', 'messages_guard()', '%s'),
        -- messages_30_no_update: outside pgconvo's code a message is never updated; pgconvo's only update of
        -- one is erasure's redaction (erase_content).
        ('messages', 'messages_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (content changes only by erasure)'')', '%s'),
        -- messages_90_append_only: messages are never deleted, by any role.
        ('messages', 'messages_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- keyed_parts_10_no_forgery: only pgconvo's code (or a superuser) writes the keyed parts, with their
        -- messages.
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- keyed_parts_20_guard: a keyed part written outside pgconvo's code must be its message's part at that
        -- ordinal (keyed_parts_guard).
        ('keyed_parts', 'keyed_parts_20_guard', 'rule', 'BEFORE', 'INSERT', 'ROW', 'keyed_parts_guard()', '%s'),
        -- keyed_parts_90_append_only: a keyed part holds ids only, which erasure keeps: it is never updated or
        -- deleted, by any role.
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- conversation_head_log_10_no_forgery: only pgconvo's code (or a superuser) writes head-log rows, so a
        -- reason or mover reaches the log only through the API (a direct head UPDATE is logged as
        -- direct_update).
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- conversation_head_log_90_append_only: the head log is append-only, for every role, the owner role
        -- included.
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- live_path_10_no_forgery: the derived index of the live paths is written only by pgconvo's code
        -- (log_head_move, move_live_path), or a superuser; never emptied by TRUNCATE, which row-level security
        -- does not bind.
        ('live_path', 'live_path_10_no_forgery', 'append_only', 'BEFORE', 'INSERT OR UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- generations_05_row_security: a role row-level security binds is refused (42501,
        -- refuse_row_security_bound) before the guards, which run as the owner role, read any row for it;
        -- pgconvo's own writes skip it in its WHEN.
        ('generations', 'generations_05_row_security', 'row_security', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_row_security_bound()', '%s'),
        -- generations_20_transition: outside pgconvo's code a generation starts streaming and ends once, and
        -- its identity never changes.
        ('generations', 'generations_20_transition', 'rule', 'BEFORE', 'INSERT OR UPDATE', 'ROW', 'generations_transition()', '%s'),
        -- generations_90_no_delete: generations are never deleted, by any role.
        ('generations', 'generations_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tools_10_no_forgery: only register_tool (or a superuser) adds to the allowlist.
        ('tools', 'tools_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tools_90_append_only: a registered tool version is frozen, for every role.
        ('tools', 'tools_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- effect_transitions_90_fixed: the effect state machine is data, and fixed.
        ('effect_transitions', 'effect_transitions_90_fixed', 'append_only', 'BEFORE', 'INSERT OR UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change(''the fixed effect state machine'')', NULL),
        -- tool_effects_10_no_forgery: only pgconvo's code (or a superuser) writes the ledger.
        ('tool_effects', 'tool_effects_10_no_forgery', 'append_only', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_effects_20_transition: outside pgconvo's code an effect changes only by a transition of the
        -- state machine (effect_transitions), CV006 otherwise.
        ('tool_effects', 'tool_effects_20_transition', 'rule', 'BEFORE', 'INSERT OR UPDATE', 'ROW', 'tool_effects_transition()', '%s'),
        -- tool_effects_30_log_direct: a transition made outside pgconvo's code gets its event, by the caller;
        -- pgconvo's own transitions log themselves.
        ('tool_effects', 'tool_effects_30_log_direct', 'rule', 'AFTER', 'INSERT OR UPDATE', 'ROW', 'tool_effects_log_direct()', '%s'),
        -- tool_effects_90_no_delete: effects are never deleted, by any role.
        ('tool_effects', 'tool_effects_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tool_effect_calls_10_no_forgery: only pgconvo's code (or a superuser) links a call to its decision.
        ('tool_effect_calls', 'tool_effect_calls_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_effect_calls_90_append_only: a call's decision never changes.
        ('tool_effect_calls', 'tool_effect_calls_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tool_effect_events_10_no_forgery: only pgconvo's code (or a superuser) writes the event log.
        ('tool_effect_events', 'tool_effect_events_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_effect_events_30_no_update: outside pgconvo's code an event is never updated; pgconvo's only
        -- update of one is erasure's redaction.
        ('tool_effect_events', 'tool_effect_events_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (evidence changes only by erasure)'')', '%s'),
        -- tool_effect_events_90_append_only: events are never deleted, by any role.
        ('tool_effect_events', 'tool_effect_events_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tool_receipts_10_no_forgery: only pgconvo's code (or a superuser) writes receipts.
        ('tool_receipts', 'tool_receipts_10_no_forgery', 'append_only', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_receipts_20_transition: outside pgconvo's code a receipt is filed pending and ends once, CV006
        -- otherwise.
        ('tool_receipts', 'tool_receipts_20_transition', 'rule', 'BEFORE', 'INSERT OR UPDATE', 'ROW', 'tool_receipts_transition()', '%s'),
        -- tool_receipts_90_no_delete: receipts are never deleted, by any role.
        ('tool_receipts', 'tool_receipts_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- erasures_10_no_forgery: only erase_conversation and erase_owner (or a superuser) record an erasure.
        ('erasures', 'erasures_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- erasures_90_append_only: the record of erasures is append-only.
        ('erasures', 'erasures_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- erasure_places_10_no_forgery: only erasure (or a superuser) records where it redacted.
        ('erasure_places', 'erasure_places_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- erasure_places_90_append_only: the record of erasures is append-only.
        ('erasure_places', 'erasure_places_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- owner_erasures_10_no_forgery: only erase_owner (or a superuser) records an erasure of an owner's
        -- receipts.
        ('owner_erasures', 'owner_erasures_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- owner_erasures_90_append_only: the record of erasures is append-only.
        ('owner_erasures', 'owner_erasures_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- import_origins_10_no_forgery: only the import functions (or a superuser) write origin records, the
        -- source nodes kept verbatim beside the messages.
        ('import_origins', 'import_origins_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- import_origins_30_no_update: outside pgconvo's code an origin record is never updated; pgconvo's
        -- only update of one is erasure's redaction.
        ('import_origins', 'import_origins_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (a source node changes only by erasure)'')', '%s'),
        -- import_origins_90_append_only: origin records are never deleted.
        ('import_origins', 'import_origins_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- imports_10_no_forgery: only the import functions (or a superuser) record an import (who, when, the
        -- document's digest), so a record names the role that really imported.
        ('imports', 'imports_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- imports_30_no_update: outside pgconvo's code an import's record is never updated; pgconvo's only
        -- update of one is erasure's redaction.
        ('imports', 'imports_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (its source key and digest change only by erasure)'')', '%s'),
        -- imports_90_append_only: the record of imports is never deleted.
        ('imports', 'imports_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- message_parts_10_refuse: convo.message_parts is a view of the parts of the messages (their array,
        -- one row a part): it is never written.
        ('message_parts', 'message_parts_10_refuse', 'append_only', 'INSTEAD OF', 'INSERT OR UPDATE OR DELETE', 'ROW', 'refuse_change(''a view of the messages'''' parts (append-only)'')', NULL)
        ) AS t (table_name, trigger_name, guards, timing, events, level, function_call, when_clause);
END;

SELECT convo_private.create_triggers();

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
