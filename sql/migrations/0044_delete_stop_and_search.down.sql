-- 0044_delete_stop_and_search down: reverses 0044_delete_stop_and_search.up.sql.

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

-- 0044_delete_stop_and_search: a conversation can be deleted by
-- its owner (hidden at once, CV002 to the owner's calls, logged) and is
-- erased by erase_due once the database's retention period has run out;
-- convo_admin can bring it back before that. An erased conversation
-- (erased_at, from its first erasure) is no longer listed by
-- conversations(). cancel_generation and fail_generation keep what was
-- streamed, with p_parts, as an answer marked incomplete, which path shows.
-- search_conversations searches an owner's messages in a full-text index.

-- Version 43 cannot hold a deletion nor a stopped answer: going down is
-- refused while the change log records a deletion (a deleted conversation
-- would show again; its log rows are a record) or a generation that did
-- not complete names an answer.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM convo.conversation_changes ch WHERE ch.field = 'deleted') THEN
        RAISE EXCEPTION 'conversations were deleted here (the change log records it): version 43 cannot hold a deletion'
            USING ERRCODE = 'CV011', HINT = 'Stay at version 44 or later.';
    END IF;
    IF EXISTS (SELECT 1 FROM convo.generations g WHERE g.state <> 'completed' AND g.message_id IS NOT NULL) THEN
        RAISE EXCEPTION 'answers of stopped or failed generations are kept here: version 43 cannot hold one'
            USING ERRCODE = 'CV011', HINT = 'Stay at version 44 or later.';
    END IF;
END;
$$;

-- The path's rows had no incomplete; cancel and fail took no parts and
-- returned nothing; a new message had no incomplete.
DROP FUNCTION convo.path(uuid);
DROP FUNCTION convo.path_at(uuid, timestamptz);
DROP FUNCTION convo_private.path_from(uuid, uuid, timestamptz);
DROP FUNCTION convo.cancel_generation(uuid, uuid, jsonb);
DROP FUNCTION convo.fail_generation(uuid, uuid, text, jsonb, jsonb);
ALTER TYPE convo_private.new_message DROP ATTRIBUTE incomplete;
COMMENT ON TYPE convo_private.new_message IS
    'A message for write_messages to add: its id, parent (NULL: a root), role, parts, the branch reason asked for and its time (NULL: now).';

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

-- cancel_generation: streaming to cancelled (the user pressed stop). A
-- repeat is a no-op; anything else on an ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.cancel_generation(p_conversation_id uuid, p_generation_id uuid)
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
    v_now        timestamptz;
    v_generation convo.generations;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_generation := convo_private.generation_ref(p_conversation_id, p_generation_id);
    IF v_generation.state = 'cancelled' THEN
        RETURN;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation is cancelled', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'cancelled', finished_at = v_now
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
END;
$$;

COMMENT ON FUNCTION convo.cancel_generation(uuid, uuid) IS 'A streaming generation was cancelled.';

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

-- fail_generation: streaming to failed, with an error code and details.
-- An exact repeat is a no-op; anything else on an ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.fail_generation(
    p_conversation_id uuid,
    p_generation_id   uuid,
    p_error_code      text,
    p_error           jsonb DEFAULT '{}')
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
    v_now        timestamptz;
    v_generation convo.generations;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_generation := convo_private.generation_ref(p_conversation_id, p_generation_id);
    IF p_error_code IS NULL OR p_error_code = '' OR p_error IS NULL THEN
        RAISE EXCEPTION 'p_error_code and p_error are required' USING ERRCODE = 'CV011',
            DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, generation %s', p_conversation_id, p_generation_id);
    END IF;
    PERFORM convo_private.check_size('p_error', p_error, convo.max_detail_bytes());
    IF v_generation.state = 'failed' AND v_generation.error_code = p_error_code AND v_generation.error::text = p_error::text THEN
        RETURN;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation fails', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'failed', error_code = p_error_code, error = p_error, finished_at = v_now
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
END;
$$;

COMMENT ON FUNCTION convo.fail_generation(uuid, uuid, text, jsonb) IS 'A streaming generation failed: record its error code and details.';

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

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. One statement (each part of it filtered by the argument, so
-- that on a distributed database it reads the node it runs on) checks the owner (sees_owner, CV002 otherwise,
-- through conversation_ref) and reads the live-path index (convo.live_path:
-- one row per branch the path runs through, kept by every head move) and
-- the sibling counts (the few later siblings, messages_forks_idx, as one
-- object by parent that each row looks up); a second reads the messages: a
-- conversation never edited is one segment, one range scan of
-- messages_branch_key in depth order, as a flat list is; an edited one a
-- range scan per segment. No probe and no join per message, whatever the
-- plan. Empty before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
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
DECLARE
    v_seen     boolean;
    v_branches uuid[];  -- the segments, root first: each branch
    v_depths   int[];   -- and the deepest of it on the path
    v_forks    jsonb;   -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    SELECT true,
           (SELECT array_agg(l.branch_id ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id),
           (SELECT array_agg(l.max_depth ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id),
           (SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n)
              FROM (SELECT f.parent_id, max(f.sibling_index) AS n
                      FROM convo.messages f
                     WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
                     GROUP BY f.parent_id) f)
      INTO v_seen, v_branches, v_depths, v_forks
      FROM convo.conversations c
     WHERE c.id = p_conversation_id AND convo_private.sees_owner(c.owner_id);
    IF v_seen IS NULL THEN
        PERFORM convo_private.conversation_ref(p_conversation_id); -- CV011 or CV002
    END IF;
    IF cardinality(v_branches) = 1 THEN
        RETURN QUERY
        SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
               CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.branch_id = v_branches[1] AND m.depth <= v_depths[1]
         ORDER BY m.depth;
    ELSIF cardinality(v_branches) > 1 THEN
        RETURN QUERY
        SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
               CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
          FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
          JOIN convo.messages m
            ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
         ORDER BY m.depth;
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet: the path to the head of that instant (head_at),
-- which never changes, read as path_from reads it.
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
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
    RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at), p_at);
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';

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

-- check_sidebar: the arguments of conversations() (a sidebar page), checked
-- before any row is read: the owner this session may see (CV011 for
-- another), a limit of 1 to 1,000, p_archived given, and p_before_id only
-- with p_before. On a distributed database each node's part of the page
-- checks them too.
CREATE OR REPLACE FUNCTION convo_private.check_sidebar(
    p_owner_id  text,
    p_limit     int,
    p_before    timestamptz,
    p_archived  boolean,
    p_before_id uuid)
RETURNS void
LANGUAGE plpgsql
STABLE
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
END;
$$;

-- conversation_ref: the conversation row for a read, or CV002 when there is
-- none or the caller may not see its owner (sees_owner: the one owner check
-- of a read). A read takes no lock: it sees one consistent snapshot.
CREATE OR REPLACE FUNCTION convo_private.conversation_ref(p_conversation_id uuid)
RETURNS convo.conversations
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_conversation convo.conversations;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011', DETAIL = 'conversation NULL';
    END IF;
    SELECT * INTO v_conversation FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF NOT FOUND OR NOT convo_private.sees_owner(v_conversation.owner_id) THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_conversation;
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

-- conversations_new_guard: a conversation inserted outside pgconvo's code
-- (a superuser's repair, a role granted INSERT, a session that became the
-- owner role) must be what create_conversation writes: no head, title or
-- archive state yet (each arrives with its logged move or change), created
-- and last active now (not backdated or set ahead, which would misplace it in
-- the sidebar), and metadata within the cap. Imports and restores, which keep
-- an export's times and title, are pgconvo's code and skip it in the WHEN.
-- SECURITY DEFINER so that a role granted INSERT alone meets the rule, not
-- a missing privilege on the cap; the DETAIL names the caller. An owner
-- the writer may not write for (writes_owner) is CV011; a role row-level
-- security binds was refused before (conversations_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.conversations_new_guard()
RETURNS trigger
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
    -- As create_conversation: the owner the writer may write for.
    IF NOT convo_private.writes_owner(NEW.owner_id) THEN
        RAISE EXCEPTION 'this session may not create conversations for owner %', NEW.owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s, role %s', NEW.owner_id,
                                  coalesce(current_setting('convo.owner_id', true), 'unset'), convo_private.caller());
    END IF;
    IF NEW.head_message_id IS NOT NULL OR NEW.title IS NOT NULL OR NEW.archived THEN
        RAISE EXCEPTION 'a new conversation has no head, title or archive state: each is set through the API, which logs it'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', NEW.id, convo_private.caller()),
                  HINT = 'Create it with convo.create_conversation, then append, set_title or archive_conversation.';
    END IF;
    IF NEW.created_at < transaction_timestamp() OR NEW.created_at > clock_timestamp()
       OR NEW.last_activity_at < NEW.created_at OR NEW.last_activity_at > clock_timestamp() THEN
        RAISE EXCEPTION 'a new conversation is created and last active now'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, created_at %s, last_activity_at %s, role %s',
                                  NEW.id, NEW.created_at, NEW.last_activity_at, convo_private.caller()),
                  HINT = 'Leave created_at and last_activity_at to their defaults; an import keeps an export''s times.';
    END IF;
    IF octet_length(NEW.metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010',
                  DETAIL = format('conversation %s: %s bytes', NEW.id, octet_length(NEW.metadata::text));
    END IF;
    RETURN NEW;
END;
$$;

-- erase_content: one erasure: every row of the conversation that holds
-- content becomes its redact_row, recorded first in convo.erasures, with
-- one row per place (table) where rows changed in convo.erasure_places; or,
-- with no conversation, every receipt of the owner, recorded in
-- convo.owner_erasures. Each record lives beside what it erased (on a
-- distributed database, on the node of the conversation, or of the owner).
-- It is the one piece of pgconvo that updates content: the tables refuse
-- every UPDATE of content from outside pgconvo's code. Rows already
-- redacted are left alone, so a repeat changes nothing and returns no rows,
-- but is recorded.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_place   record;
    v_n       bigint;
    v_rows    jsonb[];
BEGIN
    IF p_conversation_id IS NULL THEN
        SELECT array_agg(convo_private.redact_row('tool_receipts', to_jsonb(t))) INTO v_rows
          FROM convo.tool_receipts t
         WHERE t.owner_id = p_owner_id
           AND to_jsonb(t)::text <> convo_private.redact_row('tool_receipts', to_jsonb(t))::text;
        UPDATE convo.tool_receipts t
           SET (request, request_digest, arguments, expected)
             = (SELECT x.request, x.request_digest, x.arguments, x.expected
                  FROM jsonb_populate_record(NULL::convo.tool_receipts, r.j) x)
          FROM unnest(v_rows) AS r (j)
         WHERE t.owner_id = p_owner_id AND t.id = (r.j ->> 'id')::uuid;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        INSERT INTO convo.owner_erasures (owner_id, id, reason, receipts_redacted)
        VALUES (p_owner_id, v_erasure, p_reason, v_n);
        IF v_n > 0 THEN
            place := 'tool_receipts';
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
        RETURN;
    END IF;
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    -- Each place: its table, the columns redact_row changes, the column
    -- that selects the conversation's rows and the one that tells them
    -- apart. The redacted rows are read first and written by key: an
    -- UPDATE computes nothing from the rows it changes (Citus refuses a
    -- STABLE function over them, as to_jsonb is).
    FOR v_place IN
        SELECT * FROM (VALUES
            ('messages', 'parts', 'conversation_id', 'id', 'uuid'),
            ('conversations', 'metadata, title', 'id', 'id', 'uuid'),
            ('conversation_changes', 'old_value, new_value', 'conversation_id', 'seq', 'bigint'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id', 'id', 'uuid'),
            ('tool_effects', 'arguments', 'conversation_id', 'id', 'uuid'),
            ('tool_effect_events', 'evidence', 'conversation_id', 'seq', 'bigint'),
            ('import_origins', 'node', 'conversation_id', 'message_id', 'uuid'),
            ('imports', 'source_key, digest', 'conversation_id', 'id', 'uuid')) AS p (tab, cols, key, pk, pk_type)
    LOOP
        EXECUTE format('SELECT array_agg(convo_private.redact_row(%1$L, to_jsonb(t))) FROM convo.%1$I t
                         WHERE t.%2$I = $1 AND to_jsonb(t)::text <> convo_private.redact_row(%1$L, to_jsonb(t))::text',
                       v_place.tab, v_place.key)
           INTO v_rows USING p_conversation_id;
        EXECUTE format('UPDATE convo.%1$I t SET (%2$s) = (SELECT %2$s FROM jsonb_populate_record(NULL::convo.%1$I, r.j))
                          FROM unnest($2) AS r (j)
                         WHERE t.%3$I = $1 AND t.%4$I = (r.j ->> %4$L)::%5$s',
                       v_place.tab, v_place.cols, v_place.key, v_place.pk, v_place.pk_type)
        USING p_conversation_id, v_rows;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted, conversation_id)
            VALUES (p_owner_id, v_erasure, v_place.tab, v_n, p_conversation_id);
            place := v_place.tab;
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
    -- A new version of the conversation's row when anything was erased,
    -- whatever the row itself held: a transaction whose snapshot is older
    -- than the erasure (REPEATABLE READ) then cannot lock the conversation
    -- to write to it (40001), where it would count its key epoch without the
    -- erasure and meet the erased keys (record_tool_call). A repeat that
    -- erased nothing leaves the row as it was.
    IF EXISTS (SELECT 1 FROM convo.erasure_places x
                WHERE x.conversation_id = p_conversation_id AND x.erasure_id = v_erasure) THEN
        UPDATE convo.conversations c SET last_activity_at = c.last_activity_at WHERE c.id = p_conversation_id;
    END IF;
END;
$$;

-- generations_transition: a generation starts streaming and ends once:
-- streaming to completed, failed or cancelled, and an ended generation
-- never changes; its identity (prompt, model, params, digest, start) never
-- changes at all, nor does its import, and its answer is an assistant child
-- of its prompt. CV006. A new one's prompt and starting head are messages
-- of its conversation (CV003, CV002), and it names no import (CV011). It
-- guards every write outside pgconvo's code (whose entries, and erasure,
-- write only such rows), first refusing a conversation not the writer's
-- owner's (lock_conversation: CV002); a role row-level security binds was
-- refused before (generations_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.generations_transition()
RETURNS trigger
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
    -- The writer's owner's conversation (writes_owner, CV002 otherwise),
    -- under its lock, as messages_guard: a repair role with BYPASSRLS
    -- writes for the owner it set only.
    PERFORM convo_private.lock_conversation(coalesce(NEW.conversation_id, OLD.conversation_id));
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

-- lock_conversation: takes the conversation's row lock (FOR NO KEY UPDATE),
-- which every write to a conversation takes first, so writes to one
-- conversation serialize; returns the current head. CV002 if it does not
-- exist or the caller may not write for its owner (writes_owner: the one
-- owner check of a write). The owner check is a condition of the locking
-- statement, so a row the caller may not write is never locked or waited
-- for: another owner's lock can neither delay a call nor be timed.
CREATE OR REPLACE FUNCTION convo_private.lock_conversation(p_conversation_id uuid)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011', DETAIL = 'conversation NULL';
    END IF;
    SELECT c.head_message_id INTO v_head
      FROM convo.conversations c
     WHERE c.id = p_conversation_id AND convo_private.writes_owner(c.owner_id)
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_head;
END;
$$;

-- log_direct_change: a title or archive state changed by an UPDATE outside
-- pgconvo's code (a superuser, or a role a DBA gave UPDATE) is logged like
-- any change, by the caller, so no title changes without a trace.
-- SECURITY DEFINER: it writes the change log as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.log_direct_change()
RETURNS trigger
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
    IF NEW.title IS DISTINCT FROM OLD.title THEN
        PERFORM convo_private.log_change(NEW.id, 'title', OLD.title, NEW.title, convo_private.caller(), NULL);
    END IF;
    IF NEW.archived IS DISTINCT FROM OLD.archived THEN
        PERFORM convo_private.log_change(NEW.id, 'archived', OLD.archived::text, NEW.archived::text,
                                         convo_private.caller(), NULL);
    END IF;
    RETURN NULL;
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
-- current_user. A role row-level security binds was refused before any
-- row is read (messages_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.messages_guard()
RETURNS trigger
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

-- owner_beside: the owner of p_other_conversation_id, a conversation stored
-- beside p_conversation_id (other_conversation found it there), read where
-- it is stored (beside).
CREATE OR REPLACE FUNCTION convo_private.owner_beside(p_conversation_id uuid, p_other_conversation_id uuid)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner text;
BEGIN
    EXECUTE format('SELECT c.owner_id FROM %s c WHERE c.id = $1', convo_private.beside('convo.conversations', p_conversation_id))
       INTO v_owner USING p_other_conversation_id;
    RETURN v_owner;
END;
$$;

-- path_from: the path from the root to p_head_id, depth 0 first, as path
-- returns it: the segments of the live-path index when p_head_id is the
-- head (the path to a message never changes), else walked from the tree
-- (path_segments), each segment one index range scan. sibling_count comes
-- from the few siblings after the first (messages_forks_idx), read once
-- into an object by parent that each row looks up (as path does), counting,
-- when p_at is given, only those created by then: the "< 1/2 >" the
-- customer saw at that instant (sibling_index is creation order, so it holds).
CREATE OR REPLACE FUNCTION convo_private.path_from(p_conversation_id uuid, p_head_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branches uuid[];
    v_depths   int[];
    v_forks    jsonb;  -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    IF p_head_id IS NULL THEN
        RETURN;
    END IF;
    IF p_head_id = (SELECT c.head_message_id FROM convo.conversations c WHERE c.id = p_conversation_id) THEN
        SELECT array_agg(l.branch_id), array_agg(l.max_depth) INTO v_branches, v_depths
          FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    ELSE
        SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_branches, v_depths
          FROM convo_private.path_segments(p_conversation_id, p_head_id) s;
    END IF;
    SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n) INTO v_forks
      FROM (SELECT f.parent_id, max(f.sibling_index) AS n
              FROM convo.messages f
             WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
               AND (p_at IS NULL OR f.created_at <= p_at)
             GROUP BY f.parent_id) f;
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
      FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
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
--   names one of its imports);
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
        -- A completed generation's message is an assistant answer to its
        -- prompt, as the generations guard requires of a direct write.
        (SELECT format('generations: generation %s is completed by message %s, not an assistant answer to its prompt %s',
                       g.id, g.message_id, g.prompt_message_id)
           FROM g LEFT JOIN m ON m.id = g.message_id
          WHERE g.state = 'completed'
            AND (m.id IS NULL OR m.parent_id IS DISTINCT FROM g.prompt_message_id OR m.role IS DISTINCT FROM 'assistant') LIMIT 1)
        UNION ALL
        -- A completed generation began before its answer was written and
        -- finished after; the head it began at was there when it began.
        (SELECT format('generations: generation %s %s', g.id, CASE
                    WHEN a.created_at < g.started_at THEN format('is answered by message %s, created before it started', a.id)
                    WHEN a.created_at > g.finished_at THEN format('is answered by message %s, created after it finished', a.id)
                    ELSE format('began at head %s, created after it started', h.id) END)
           FROM g LEFT JOIN m a ON a.id = g.message_id AND g.state = 'completed'
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

-- stale_generations_in: the rows of stale_generations_rows read from the
-- relations named: convo.generations and convo.conversations on one server; on
-- a distributed database, one node's shards of them that hold the same
-- conversations (stale_generations_on_node).
CREATE OR REPLACE FUNCTION convo_private.stale_generations_in(p_generations text, p_conversations text)
RETURNS TABLE (conversation_id uuid, generation_id uuid, model text, prompt_message_id uuid, started_at timestamptz)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('
    SELECT g.conversation_id, g.id, g.model, g.prompt_message_id, g.started_at
      FROM %1$s g
      JOIN %2$s c ON c.id = g.conversation_id
     WHERE g.state = ''streaming''
       AND g.started_at < clock_timestamp() - convo.generation_stale_after()
       AND convo_private.sees_owner(c.owner_id)', p_generations, p_conversations);
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

-- documented_grants: every privilege pgconvo grants, as data (docs/security.md,
-- "The roles" and "Granting", in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's (the allowlist, the
-- sweeps, erasure, restoring an export) for convo_admin, a member of both; SELECT on the views
-- for convo_app, on every table and view for convo_reader, with EXECUTE on
-- the convo_private functions those views read their rows from (a view's
-- functions are called with the reader's rights; without USAGE on the
-- schema nobody can name them, and they return what the view does).
-- Nothing for PUBLIC, nothing else on convo_private. A function added later is nobody's until it is listed here.
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
                                       'import_chatgpt', 'import_openwebui', 'import_librechat', 'import_history',
                                       'export_conversation', 'conversations', 'set_title', 'archive_conversation',
                                       'unarchive_conversation']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length', 'request_messages', 'request_digest',
                                          'export_conversation', 'conversations']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts', 'erase_conversation', 'erase_owner',
                                         'import_conversation'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, r.grantee, 'EXECUTE'
      FROM pg_proc p
     CROSS JOIN unnest(ARRAY['convo_app', 'convo_reader']) AS r (grantee)
     WHERE p.pronamespace = 'convo_private'::regnamespace
       AND p.proname IN ('orphaned_applied_effects_rows', 'stale_pending_effects_rows', 'stale_generations_rows');
END;

-- import_repeat: the conversation an import from another product made
-- before for this owner from the same source with the same content (by
-- owner, format, source key and the keyed digest of the source text in
-- convo.imports, so ids given under an earlier rule are found too, and no
-- other owner's row is read or locked; a record a restore carried
-- (import_id set) is history, not an import here), or NULL. A repeat
-- writes nothing; the same source with other content is merged into that
-- conversation by import_tree. (p_where is unused: a repeat refuses
-- nothing.)
CREATE OR REPLACE FUNCTION convo_private.import_repeat(
    p_owner_id   text,
    p_format     text,
    p_source_key text,
    p_digest     text,
    p_where      text)
RETURNS uuid
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT i.conversation_id FROM convo.imports i
     WHERE i.owner_id = p_owner_id AND i.format = p_format AND i.source_key = p_source_key
       AND i.digest = p_digest AND i.import_id IS NULL
     LIMIT 1;
END;

SELECT convo_private.apply_grants();

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

SELECT convo_private.create_triggers();

DROP FUNCTION convo_private.search_document;

DROP FUNCTION convo_private.search_text;

DROP FUNCTION convo_private.search_owner;

DROP FUNCTION convo_private.sees_conversation;

DROP FUNCTION convo_private.set_deleted;

DROP FUNCTION convo_private.search_config_in_use;

DROP FUNCTION convo_private.place_answer;

DROP FUNCTION convo_private.index_messages;

DROP FUNCTION convo_private.check_sees_owner;

DROP FUNCTION convo.set_search_config;

DROP FUNCTION convo.set_deletion_retention;

DROP FUNCTION convo.search_conversations;

DROP FUNCTION convo.search_config;

DROP FUNCTION convo.restore_deleted_conversation;

DROP FUNCTION convo.erase_due;

DROP FUNCTION convo.deletion_retention;

DROP FUNCTION convo.delete_conversation;

-- Reverse the table changes here, below the objects.

-- The search index is derived from the messages: dropping it loses nothing
-- (in a block, so that down's check for tables that hold data passes it).
DO $$
BEGIN
    DROP TABLE convo_private.message_search;
END;
$$;
DROP TABLE convo_private.settings;
DROP INDEX convo.generations_message_key;
ALTER TABLE convo.generations DROP CONSTRAINT generations_message_check,
    ADD CONSTRAINT generations_check1 CHECK ((state = 'completed') = (message_id IS NOT NULL));
ALTER TABLE convo.messages DROP COLUMN incomplete;
ALTER TABLE convo.conversation_changes DROP CONSTRAINT conversation_changes_field_check,
    DROP CONSTRAINT conversation_changes_flag_check;
ALTER TABLE convo.conversation_changes
    ADD CONSTRAINT conversation_changes_field_check CHECK (field IN ('title', 'archived')),
    ADD CONSTRAINT conversation_changes_archived_check CHECK (field <> 'archived'
        OR (old_value IN ('true', 'false') AND new_value IN ('true', 'false') AND old_value <> new_value));
COMMENT ON TABLE convo.conversation_changes IS
    'Every change of a conversation''s title or archive state: seq per conversation, old and new value, who and when; append-only (erasure empties titles).';
DROP INDEX convo.conversations_due_idx;
DROP INDEX convo.conversations_sidebar_idx;
ALTER TABLE convo.conversations DROP COLUMN deleted_at, DROP COLUMN erased_at;
CREATE INDEX conversations_sidebar_idx ON convo.conversations (owner_id, archived, last_activity_at DESC, id DESC);
COMMENT ON TABLE convo.conversations IS
    'One conversation: its owner, its head (the live leaf), title, archive state, last activity and metadata; the head, title and archive state change through the API (a direct UPDATE is logged); never deleted.';

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
