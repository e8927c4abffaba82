-- 0038_no_plan_or_guard_leaks: the owner-filtered views read through
-- SECURITY DEFINER functions (EXPLAIN ANALYZE counted other owners' rows
-- below a barrier's filter); SECURITY DEFINER functions pin the settings
-- that print what runs inside them; a role row-level security binds is
-- refused before a guard reads a row; live_path refuses TRUNCATE; a repair
-- role's direct writes keep to the owner it set.

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

-- alternatives: a message and its siblings, oldest first ("you previously
-- asked ..."): whether each is on the live path, and the most recently
-- created leaf below it, to switch to with move_head. One pass over the
-- siblings' subtrees, and the path walked once, whatever the sibling count.
CREATE OR REPLACE FUNCTION convo.alternatives(p_conversation_id uuid, p_message_id uuid)
RETURNS TABLE (message_id uuid, branch_reason text, created_at timestamptz, on_head_path boolean,
               latest_leaf_id uuid)
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
AS $$
DECLARE
    v_head    uuid := (convo_private.conversation_ref(p_conversation_id)).head_message_id;
    v_message convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
    -- The one sibling on the path: the path's message at the siblings' depth.
    v_on_path uuid := (SELECT m.id FROM convo_private.path_segments(p_conversation_id, v_head) s
                         JOIN convo.messages m ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id
                        WHERE m.depth = v_message.depth AND m.depth <= s.max_depth
                        LIMIT 1);
BEGIN
    RETURN QUERY
    WITH RECURSIVE siblings AS (
        SELECT s.id, s.branch_reason, s.created_at, s.sibling_index
          FROM convo.messages s
         WHERE s.conversation_id = p_conversation_id
           AND s.parent_id IS NOT DISTINCT FROM v_message.parent_id
    ), below (sibling_id, id, created_at) AS (
        SELECT s.id, s.id, s.created_at FROM siblings s
        UNION ALL
        SELECT b.sibling_id, c.id, c.created_at
          FROM below b
          JOIN convo.messages c ON c.conversation_id = p_conversation_id AND c.parent_id = b.id
    ), latest_leaf AS (
        SELECT DISTINCT ON (b.sibling_id) b.sibling_id, b.id
          FROM below b
         WHERE NOT EXISTS (SELECT 1 FROM convo.messages c
                            WHERE c.conversation_id = p_conversation_id AND c.parent_id = b.id)
         ORDER BY b.sibling_id, b.created_at DESC, b.id DESC
    )
    SELECT s.id, s.branch_reason, s.created_at, s.id IS NOT DISTINCT FROM v_on_path, l.id
      FROM siblings s
      LEFT JOIN latest_leaf l ON l.sibling_id = s.id
     ORDER BY s.sibling_index;
END;
$$;

COMMENT ON FUNCTION convo.alternatives(uuid, uuid) IS
    'A message and its siblings, oldest first: whether each is on the live path, and its most recent leaf.';

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
    PERFORM convo_private.write_messages(p_conversation_id, v_head, ARRAY[v_id], ARRAY[v_head], ARRAY[p_role],
                                         ARRAY[p_parts], NULL, NULL, NULL, v_id, 'append', p_moved_by);
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
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_now     timestamptz;
BEGIN
    IF p_result_ref IS NULL OR p_result_ref = '' OR p_http_status IS NULL OR p_http_status NOT BETWEEN 200 AND 299 THEN
        RAISE EXCEPTION 'p_result_ref and a 2xx p_http_status are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_result_ref) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_result_ref is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = 'applied' AND v_receipt.result_ref = p_result_ref AND v_receipt.http_status = p_http_status THEN
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' OR v_receipt.arguments_valid IS NOT TRUE THEN
        RAISE EXCEPTION 'receipt % is % with % arguments: only a pending receipt with valid arguments is applied',
                p_receipt_id, v_receipt.status,
                CASE v_receipt.arguments_valid WHEN true THEN 'valid' WHEN false THEN 'invalid' ELSE 'no' END
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = 'applied', result_ref = p_result_ref, http_status = p_http_status, settled_at = v_now
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, 'applied', true);
END;
$$;

COMMENT ON FUNCTION convo.apply_receipt(uuid, text, int) IS
    'Mark a pending, validly filled receipt applied; run it in the mutation''s own transaction to make the two atomic.';

-- archive_conversation: hides a conversation from conversations() (the
-- sidebar) until unarchive_conversation; logged in the change log like a
-- title. Nothing is deleted; path, export and every other call still work.
CREATE OR REPLACE FUNCTION convo.archive_conversation(p_conversation_id uuid)
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
AS $$
BEGIN
    PERFORM convo_private.set_archived(p_conversation_id, true);
END;
$$;

COMMENT ON FUNCTION convo.archive_conversation(uuid) IS
    'Hide a conversation from conversations() (logged: who, when); nothing is deleted. A repeat changes nothing.';

-- args_errors: validates a JSON value against an argument schema (the
-- subset check_args_schema admits, boolean schemas included) inside the
-- database. Returns one line per failure, naming the JSON path and the rule
-- ("$.amount_minor: minimum 1"), or an empty array when the value is valid.
-- It walks the schema and the value together with a stack of its own, not
-- by recursion, visiting each value at most once: linear in the value, and
-- no input can exhaust the server's stack. A value nested deeper than 64
-- levels of arrays and objects fails as a whole ("$: nesting: ...") before
-- any rule is looked at, whatever the schema. SQL NULL is no JSON value: CV011.
CREATE OR REPLACE FUNCTION convo.args_errors(p_schema jsonb, p_value jsonb, p_path text DEFAULT '$')
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
AS $$
DECLARE
    v_errors  text[] := '{}';
    -- The stack of (schema, value, path) still to check; v_top is its height.
    v_schemas jsonb[] := ARRAY[p_schema];
    v_values  jsonb[] := ARRAY[p_value];
    v_paths   text[] := ARRAY[p_path];
    v_top     int := 1;
    v_base    int;
    v_schema  jsonb;
    v_value   jsonb;
    v_path    text;
    v_type    text;
    v_types   jsonb;
    v_num     numeric;
    v_len     int;
    v_key     text;
    v_sub     jsonb;
    v_i       int;
    v_lo      int;
    v_hi      int;
BEGIN
    IF p_schema IS NULL OR p_value IS NULL OR p_path IS NULL THEN
        RAISE EXCEPTION 'p_schema, p_value and p_path are required'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s is SQL NULL', concat_ws(', ', CASE WHEN p_schema IS NULL THEN 'p_schema' END,
                                                          CASE WHEN p_value IS NULL THEN 'p_value' END,
                                                          CASE WHEN p_path IS NULL THEN 'p_path' END)),
                  HINT = 'JSON null is the jsonb value ''null'', not SQL NULL.';
    END IF;
    -- The nesting cap, measured by one bounded jsonpath walk (it looks no
    -- deeper than level 64): is there an array or object at level 64, that
    -- is, a 65th level of nesting?
    IF jsonb_path_exists(p_value, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') THEN
        RETURN ARRAY[format('%s: nesting: deeper than 64 levels of arrays and objects', p_path)];
    END IF;

    WHILE v_top > 0 LOOP
        v_schema := v_schemas[v_top];
        v_value := v_values[v_top];
        v_path := v_paths[v_top];
        v_top := v_top - 1;
        v_base := v_top;

        IF v_schema = 'true' THEN
            CONTINUE;
        ELSIF v_schema = 'false' THEN
            v_errors := v_errors || format('%s: false: no value is allowed', v_path);
            CONTINUE;
        END IF;

        v_type := jsonb_typeof(v_value);
        v_num := CASE WHEN v_type = 'number' THEN v_value::text::numeric END;
        IF v_schema ? 'type' THEN
            v_types := CASE jsonb_typeof(v_schema -> 'type') WHEN 'array' THEN v_schema -> 'type'
                                                             ELSE jsonb_build_array(v_schema -> 'type') END;
            IF NOT (v_types ? v_type OR (v_type = 'number' AND v_types ? 'integer' AND v_num = trunc(v_num))) THEN
                v_errors := v_errors || format('%s: type: expected %s, got %s', v_path,
                                               array_to_string(ARRAY(SELECT jsonb_array_elements_text(v_types)), ' or '), v_type);
                CONTINUE;
            END IF;
        END IF;
        -- jsonb's equality: numbers by value (1 = 1.0), objects whatever
        -- their key order, strings by code point.
        IF v_schema ? 'const' AND v_value <> v_schema -> 'const' THEN
            v_errors := v_errors || format('%s: const: must be %s', v_path, v_schema -> 'const');
        END IF;
        IF v_schema ? 'enum' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_schema -> 'enum') e WHERE e = v_value) THEN
            v_errors := v_errors || format('%s: enum: must be one of %s', v_path, v_schema -> 'enum');
        END IF;

        IF v_type = 'string' THEN
            v_len := length(v_value #>> '{}');  -- characters (code points), not bytes
            IF v_len < (v_schema ->> 'minLength')::numeric THEN
                v_errors := v_errors || format('%s: minLength %s', v_path, v_schema -> 'minLength');
            END IF;
            IF v_len > (v_schema ->> 'maxLength')::numeric THEN
                v_errors := v_errors || format('%s: maxLength %s', v_path, v_schema -> 'maxLength');
            END IF;
            IF v_schema ? 'pattern' AND NOT (v_value #>> '{}') ~ (v_schema ->> 'pattern') THEN
                v_errors := v_errors || format('%s: pattern %s', v_path, v_schema -> 'pattern');
            END IF;
        ELSIF v_type = 'number' THEN
            IF v_num < (v_schema ->> 'minimum')::numeric THEN
                v_errors := v_errors || format('%s: minimum %s', v_path, v_schema -> 'minimum');
            END IF;
            IF v_num > (v_schema ->> 'maximum')::numeric THEN
                v_errors := v_errors || format('%s: maximum %s', v_path, v_schema -> 'maximum');
            END IF;
        ELSIF v_type = 'array' THEN
            v_len := jsonb_array_length(v_value);
            IF v_len < (v_schema ->> 'minItems')::numeric THEN
                v_errors := v_errors || format('%s: minItems %s', v_path, v_schema -> 'minItems');
            END IF;
            IF v_len > (v_schema ->> 'maxItems')::numeric THEN
                v_errors := v_errors || format('%s: maxItems %s', v_path, v_schema -> 'maxItems');
            END IF;
            IF v_schema ? 'items' AND v_schema -> 'items' <> 'true' THEN
                FOR v_sub, v_i IN SELECT e.value, e.ordinality - 1 FROM jsonb_array_elements(v_value) WITH ORDINALITY e LOOP
                    v_top := v_top + 1;
                    v_schemas[v_top] := v_schema -> 'items';
                    v_values[v_top] := v_sub;
                    v_paths[v_top] := format('%s[%s]', v_path, v_i);
                END LOOP;
            END IF;
        ELSIF v_type = 'object' THEN
            FOR v_key IN SELECT jsonb_array_elements_text(v_schema -> 'required') LOOP
                IF NOT v_value ? v_key THEN
                    v_errors := v_errors || format('%s: required', convo_private.json_path(v_path, v_key));
                END IF;
            END LOOP;
            FOR v_key, v_sub IN SELECT * FROM jsonb_each(v_value) LOOP
                IF v_schema -> 'properties' ? v_key THEN
                    v_top := v_top + 1;
                    v_schemas[v_top] := v_schema -> 'properties' -> v_key;
                    v_values[v_top] := v_sub;
                    v_paths[v_top] := convo_private.json_path(v_path, v_key);
                ELSIF v_schema -> 'additionalProperties' = 'false' THEN
                    v_errors := v_errors || format('%s: additionalProperties: not allowed', convo_private.json_path(v_path, v_key));
                END IF;
            END LOOP;
        END IF;

        -- The children were pushed in document order: reverse them on the
        -- stack, so that they are checked, and their errors listed, in it.
        v_lo := v_base + 1;
        v_hi := v_top;
        WHILE v_lo < v_hi LOOP
            v_schema := v_schemas[v_lo]; v_schemas[v_lo] := v_schemas[v_hi]; v_schemas[v_hi] := v_schema;
            v_value := v_values[v_lo];   v_values[v_lo] := v_values[v_hi];   v_values[v_hi] := v_value;
            v_path := v_paths[v_lo];     v_paths[v_lo] := v_paths[v_hi];     v_paths[v_hi] := v_path;
            v_lo := v_lo + 1;
            v_hi := v_hi - 1;
        END LOOP;
    END LOOP;
    RETURN v_errors;
END;
$$;

COMMENT ON FUNCTION convo.args_errors(jsonb, jsonb, text) IS
    'Validate a JSON value against an argument schema (the supported JSON Schema subset): one "path: rule" line per failure.';

-- begin_generation: the model starts work on the path ending at the prompt
-- message. Records the head at this moment, so complete_generation can tell
-- whether the user moved on meanwhile. Retry-safe by p_generation_id.
CREATE OR REPLACE FUNCTION convo.begin_generation(
    p_conversation_id   uuid,
    p_prompt_message_id uuid,
    p_model             text,
    p_params            jsonb DEFAULT '{}',
    p_request_digest    text DEFAULT NULL,
    p_generation_id     uuid DEFAULT NULL)
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
AS $$
DECLARE
    v_head     uuid := convo_private.lock_conversation(p_conversation_id);
    v_id       uuid := coalesce(p_generation_id, gen_random_uuid());
    v_existing convo.generations;
BEGIN
    IF p_model IS NULL OR p_model = '' OR p_params IS NULL OR jsonb_typeof(p_params) <> 'object' THEN
        RAISE EXCEPTION 'p_model and p_params (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_existing FROM convo.generations g WHERE g.conversation_id = p_conversation_id AND g.id = v_id;
    IF FOUND THEN
        IF v_existing.prompt_message_id IS DISTINCT FROM p_prompt_message_id OR v_existing.model <> p_model
           OR v_existing.params::text <> p_params::text OR v_existing.request_digest IS DISTINCT FROM p_request_digest THEN
            RAISE EXCEPTION 'generation id % is already used for a different generation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('generation %s, conversation %s', v_id, p_conversation_id);
        END IF;
        RETURN v_id;
    END IF;
    PERFORM convo_private.message_ref(p_conversation_id, p_prompt_message_id);
    PERFORM convo_private.check_size('p_params', p_params, convo.max_detail_bytes());
    IF length(p_request_digest) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_request_digest is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, prompt %s', p_conversation_id, p_prompt_message_id);
    END IF;
    INSERT INTO convo.generations (conversation_id, id, prompt_message_id, head_at_begin, model, params, request_digest)
    VALUES (p_conversation_id, v_id, p_prompt_message_id, v_head, p_model, p_params, p_request_digest);
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.begin_generation(uuid, uuid, text, jsonb, text, uuid) IS
    'Start a generation (state streaming) on the path ending at the prompt message; retry-safe by p_generation_id.';

-- begin_receipt: the receipt row first, in pending, before the model fills
-- any argument: one allowlisted tool, its version frozen here. A repeat with
-- the same owner and key returns the first row (created = false); the same
-- key with another tool or request raises CV009. A key whose receipt was
-- erased (erase_owner, at or after its creation) raises CV009 for any
-- request, in words that name no request: the kept digest is never compared
-- with a guess. A convo_app session files receipts only for the owner it set
-- (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.begin_receipt(
    p_owner_id        text,
    p_idempotency_key text,
    p_tool_name       text,
    p_request         jsonb DEFAULT '{}')
RETURNS TABLE (receipt_id uuid, status text, http_status int, error_code text, result_ref text, created boolean)
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
    -- Held against an owner-wide erasure running meanwhile (hold_owner).
    PERFORM convo_private.hold_owner(p_owner_id, false);
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
    IF EXISTS (SELECT 1 FROM convo.erasures r
                WHERE r.owner_id = v_receipt.owner_id AND r.conversation_id IS NULL
                  AND r.erased_at >= v_receipt.created_at) THEN
        RAISE EXCEPTION 'idempotency key % belongs to an erased request; use a new key', p_idempotency_key
            USING ERRCODE = 'CV009',
                  DETAIL = format('receipt %s, owner %s, erased', v_receipt.id, p_owner_id),
                  HINT = 'A receipt''s request is not compared with anything once erased: file the request again under a new key.';
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
    'File a receipt (pending) before a route-initiated mutation; a repeat of the key returns the first row (CV009 once its request was erased).';

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

-- compensate_effect: applied to compensated. A settled capture cannot be
-- withdrawn, only answered by a second movement (a refund, a reversal),
-- named by its id in compensated_by. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.compensate_effect(
    p_conversation_id uuid,
    p_effect_id       uuid,
    p_compensated_by  text,
    p_evidence        jsonb DEFAULT '{}')
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
AS $$
DECLARE
    v_effect convo.tool_effects;
    v_now    timestamptz;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_compensated_by IS NULL OR p_compensated_by = '' OR p_evidence IS NULL THEN
        RAISE EXCEPTION 'p_compensated_by (the id of the answering movement) and p_evidence are required'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF length(p_compensated_by) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_compensated_by is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('effect %s', p_effect_id);
    END IF;
    PERFORM convo_private.check_size('evidence', p_evidence, convo.max_detail_bytes());
    IF v_effect.state = 'compensated' AND v_effect.compensated_by = p_compensated_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'applied' THEN
        RAISE EXCEPTION 'effect % is %: only an applied effect is compensated', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, compensated_by %s', p_effect_id, v_effect.state, v_effect.compensated_by);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = 'compensated', compensated_by = p_compensated_by, compensated_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'applied', 'compensated', convo_private.caller(), p_evidence);
END;
$$;

COMMENT ON FUNCTION convo.compensate_effect(uuid, uuid, text, jsonb) IS
    'An applied effect answered by a second movement (refund, reversal) named in p_compensated_by.';

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
    PERFORM convo_private.write_messages(p_conversation_id, v_head, ARRAY[v_message],
        ARRAY[v_generation.prompt_message_id], ARRAY['assistant'], ARRAY[p_parts], ARRAY[v_reason], NULL, NULL,
        CASE WHEN v_head IS NOT DISTINCT FROM v_generation.head_at_begin THEN v_message END,
        CASE WHEN v_reason = 'regenerate' THEN 'regenerate' ELSE 'append' END, NULL);
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

-- confirm_effect: a person confirms a held re-run: awaiting_confirmation to
-- pending, under a key of its own that names the re-run and the effect it
-- repeats (so the outside service sees a new request), its deadline
-- starting now. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.confirm_effect(p_conversation_id uuid, p_effect_id uuid, p_confirmed_by text)
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
AS $$
DECLARE
    v_effect   convo.tool_effects;
    v_now      timestamptz;
    v_deadline interval;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_confirmed_by IS NULL OR p_confirmed_by = '' THEN
        RAISE EXCEPTION 'p_confirmed_by is required' USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF v_effect.confirmed_by = p_confirmed_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'awaiting_confirmation' THEN
        RAISE EXCEPTION 'effect % is %: only an effect awaiting confirmation is confirmed', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, confirmed_by %s', p_effect_id, v_effect.state, v_effect.confirmed_by);
    END IF;
    v_now := clock_timestamp();
    SELECT t.deadline INTO v_deadline FROM convo.tools t
     WHERE t.name = v_effect.tool_name AND t.version = v_effect.tool_version;
    UPDATE convo.tool_effects e
       SET state = 'pending',
           idempotency_key = 'rerun:' || e.id || ':of:' || e.repeats_effect_id,
           confirmed_by = p_confirmed_by,
           confirmed_at = v_now,
           deadline_at = v_now + v_deadline
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'awaiting_confirmation', 'pending', p_confirmed_by, '{}');
END;
$$;

COMMENT ON FUNCTION convo.confirm_effect(uuid, uuid, text) IS
    'Confirm a held re-run: awaiting_confirmation to pending under a key of its own naming the effect it repeats.';

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

-- create_conversation: a new conversation; with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
-- Retry-safe through p_conversation_id: the same call returns the same id.
-- A convo_app session creates only for the owner it set (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.create_conversation(
    p_owner_id        text,
    p_system_prompt   text DEFAULT NULL,
    p_metadata        jsonb DEFAULT '{}',
    p_conversation_id uuid DEFAULT NULL)
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
AS $$
DECLARE
    v_id       uuid := coalesce(p_conversation_id, gen_random_uuid());
    v_existing convo.conversations;
    v_taken    boolean := false;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
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
        RAISE EXCEPTION 'this session may not create conversations for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
    -- Held against an owner-wide erasure running meanwhile (hold_owner).
    PERFORM convo_private.hold_owner(p_owner_id, false);
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
    IF p_conversation_id IS NOT NULL THEN
        PERFORM FROM convo.conversations c WHERE c.id = v_id;
        v_taken := FOUND;
    END IF;
    IF NOT v_taken THEN
        INSERT INTO convo.conversations (id, owner_id, metadata)
        VALUES (v_id, p_owner_id, p_metadata)
        ON CONFLICT (id) DO NOTHING;
        v_taken := NOT FOUND; -- a concurrent call with the same id came first
    END IF;
    IF v_taken THEN
        -- The same owner, metadata and system prompt return the first
        -- result; anything else, another owner's id included, is CV009.
        -- Locked only if it is this owner's.
        SELECT * INTO v_existing FROM convo.conversations c
         WHERE c.id = v_id AND c.owner_id = p_owner_id
           FOR NO KEY UPDATE;
        -- The system prompt is the message the 'create' move named, whatever
        -- was appended since; compared as text, like the metadata.
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata::text IS DISTINCT FROM p_metadata::text
           OR (SELECT m.parts FROM convo.conversation_head_log l
                 JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.head_message_id
                WHERE l.conversation_id = v_id AND l.reason = 'create')::text IS DISTINCT FROM v_parts::text THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        RETURN v_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        PERFORM convo_private.write_messages(v_id, NULL, ARRAY[v_root], ARRAY[NULL::uuid], ARRAY['system'],
                                             ARRAY[v_parts], NULL, NULL, NULL, v_root, 'create', NULL);
    END IF;
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.create_conversation(text, text, jsonb, uuid) IS
    'New conversation for an owner; a system prompt becomes the root message and the head. Retry-safe by p_conversation_id.';

-- decline_effect: a person declines a held re-run: awaiting_confirmation to
-- failed with error code 'declined'; who declined is in the event log. An
-- exact repeat (same person) is a no-op.
CREATE OR REPLACE FUNCTION convo.decline_effect(p_conversation_id uuid, p_effect_id uuid, p_declined_by text)
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
AS $$
DECLARE
    v_effect convo.tool_effects;
    v_now    timestamptz;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_declined_by IS NULL OR p_declined_by = '' THEN
        RAISE EXCEPTION 'p_declined_by is required' USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF v_effect.state = 'failed' AND v_effect.error_code = 'declined'
       AND (SELECT ev.actor FROM convo.tool_effect_events ev
             WHERE ev.conversation_id = p_conversation_id AND ev.effect_id = p_effect_id AND ev.to_state = 'failed'
             ORDER BY ev.seq DESC LIMIT 1) = p_declined_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'awaiting_confirmation' THEN
        RAISE EXCEPTION 'effect % is %: only an effect awaiting confirmation is declined', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s', p_effect_id, v_effect.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = 'failed', error_code = 'declined', settled_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'awaiting_confirmation', 'failed', p_declined_by, '{}');
END;
$$;

COMMENT ON FUNCTION convo.decline_effect(uuid, uuid, text) IS
    'Decline a held re-run: awaiting_confirmation to failed, error_code declined.';

-- effect_for_call: what the agent loop must do for a tool call, read from the
-- ledger decision written when the call was appended: execute (send with
-- idempotency_key), reuse (take the existing outcome), confirm (ask a
-- person), rejected, or replay (a registered tool without effects). A call
-- of a tool that was not registered then is CV007, whatever came after.
CREATE OR REPLACE FUNCTION convo.effect_for_call(p_conversation_id uuid, p_tool_call_id text)
RETURNS TABLE (effect_id uuid, decision text, state text, idempotency_key text, external_ref text,
               http_status int, error_code text)
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
AS $$
DECLARE
    v_tool_name text;
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    IF p_tool_call_id IS NULL THEN
        RAISE EXCEPTION 'p_tool_call_id is required' USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT p.tool_name INTO v_tool_name FROM convo.keyed_parts p
     WHERE p.conversation_id = p_conversation_id AND p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id;
    IF NOT FOUND THEN
        PERFORM convo_private.raise_not_found('tool call', p_tool_call_id, p_conversation_id,
            (SELECT p.conversation_id FROM convo.keyed_parts p
              WHERE p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id LIMIT 1));
    END IF;

    RETURN QUERY
    SELECT e.id, l.decision, e.state, e.idempotency_key, e.external_ref, e.http_status, e.error_code
      FROM convo.tool_effect_calls l
      LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
     WHERE l.conversation_id = p_conversation_id AND l.tool_call_id = p_tool_call_id;
    IF FOUND THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'tool % of call % was not on the allowlist when the call was appended',
            v_tool_name, p_tool_call_id
        USING ERRCODE = 'CV007',
              DETAIL = format('tool %s, tool call %s, conversation %s', v_tool_name, p_tool_call_id, p_conversation_id),
              HINT = 'An unregistered tool never gets a go-ahead; register it, then append a new call.';
END;
$$;

COMMENT ON FUNCTION convo.effect_for_call(uuid, text) IS
    'What the agent loop must do for a tool call: execute, reuse, confirm, rejected or replay (CV007 for an unregistered tool).';

-- erase_conversation: removes every copy of a conversation's content (see
-- redact_row) and keeps its shape: the tree, the head log and the ledger
-- stay whole and reconcilable. Recorded in convo.erasures (who, when, why)
-- and convo.erasure_places (rows per place), a repeat too. convo_admin's.
CREATE OR REPLACE FUNCTION convo.erase_conversation(p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
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
AS $$
DECLARE
    v_owner text;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT c.owner_id INTO v_owner FROM convo.conversations c WHERE c.id = p_conversation_id;
    RETURN QUERY SELECT * FROM convo_private.erase_content(v_owner, p_conversation_id, p_reason);
END;
$$;

COMMENT ON FUNCTION convo.erase_conversation(uuid, text) IS
    'Erase a conversation''s content everywhere it is stored, keeping its shape; recorded with p_reason. Returns rows per place.';

-- erase_owner: erase_conversation for every conversation of an owner, and
-- the owner's receipts (request, arguments, expected values), in one
-- transaction; each conversation's erasure and the receipts' are recorded
-- on their own. An owner with nothing stored is not an error. It holds the
-- owner exclusive first (hold_owner), so it waits for every open transaction
-- that made a conversation, receipt or import of the owner's and nothing new
-- is made meanwhile, then locks and erases exactly the conversations it
-- listed. convo_admin's;
-- the caller (convo_private.caller, not a SECURITY DEFINER helper's owner)
-- must be one that may write for the owner, else CV011.
CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
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
AS $$
DECLARE
    v_ids uuid[];
    v_id  uuid;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL or empty';
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    -- The caller may erase only an owner it may write for (writes_owner:
    -- every owner for convo_admin, else the one its session set), as
    -- erase_conversation may erase only such a conversation; checked before
    -- any lock is taken. CV011, as begin_receipt answers another owner.
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not erase owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Erase as a member of convo_admin, or set convo.owner_id to the owner erased.';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s', p_owner_id);
    END IF;
    PERFORM convo_private.hold_owner(p_owner_id, true);
    -- Lock the owner's conversations in one order, each by its key, as every
    -- writer would, and erase exactly those.
    SELECT array_agg(c.id ORDER BY c.id) INTO v_ids FROM convo.conversations c WHERE c.owner_id = p_owner_id;
    FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
    END LOOP;
    RETURN QUERY
    SELECT e.place, sum(e.rows_redacted)::bigint
      FROM (SELECT x.* FROM unnest(v_ids) AS c (id)
                  CROSS JOIN LATERAL convo_private.erase_content(p_owner_id, c.id, p_reason) x
            UNION ALL
            SELECT y.* FROM convo_private.erase_content(p_owner_id, NULL, p_reason) y) e
     GROUP BY e.place
     ORDER BY e.place;
END;
$$;

COMMENT ON FUNCTION convo.erase_owner(text, text) IS
    'Erase the content of every conversation and receipt of an owner, keeping their shape; recorded with p_reason.';

-- expire_receipts: the sweeper: pending receipts past their tool's deadline
-- fail with 504 deadline_exceeded, so none stays pending forever. Returns
-- how many it failed.
CREATE OR REPLACE FUNCTION convo.expire_receipts(p_now timestamptz DEFAULT clock_timestamp())
RETURNS int
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
AS $$
DECLARE
    v_count int;
    v_now   timestamptz;
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'p_now is required' USING ERRCODE = 'CV011', DETAIL = 'p_now NULL';
    END IF;
    v_now := clock_timestamp();
    WITH expired AS (
        UPDATE convo.tool_receipts r
           SET status = 'failed', http_status = 504, error_code = 'deadline_exceeded', settled_at = v_now
         WHERE r.status = 'pending' AND r.deadline_at < p_now
        RETURNING r.id, r.arguments IS NOT NULL AS filled)
    SELECT count(*) INTO v_count
      FROM expired e, LATERAL (SELECT convo_private.notify_receipt(e.id, 'failed', e.filled)) n;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION convo.expire_receipts(timestamptz) IS
    'Fail pending receipts past their tool''s deadline with 504 deadline_exceeded; returns the count.';

-- export_conversation: everything pgconvo holds about one conversation, as
-- one JSON document that import_conversation restores (the answer to a
-- data-subject access request, too). A read: the caller must see
-- the conversation's owner (CV002 otherwise, as path does).
CREATE OR REPLACE FUNCTION convo.export_conversation(p_conversation_id uuid)
RETURNS jsonb
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
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    RETURN convo_private.export_of(p_conversation_id);
END;
$$;

COMMENT ON FUNCTION convo.export_conversation(uuid) IS
    'Everything stored about one conversation as JSON: {"format": "pgconvo.export", "version": 3, "conversation": its row, "messages": the tree with parts, "head_log", "changes": its titles and archive states, "generations", "tools": the tool versions its calls and effects were checked against, "tool_calls": ledger decisions, "effects", "effect_events", "erasures" (with places), "origins": the source node of each imported message, "imports": its record of imports}; each row as its table''s columns, times in UTC. See docs/erasure.md.';

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
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_now     timestamptz;
BEGIN
    IF p_error_code IS NULL OR p_error_code = '' OR p_http_status IS NULL OR p_http_status NOT BETWEEN 400 AND 599 THEN
        RAISE EXCEPTION 'p_error_code and a 4xx or 5xx p_http_status are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = 'failed' AND v_receipt.error_code = p_error_code AND v_receipt.http_status = p_http_status THEN
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' THEN
        RAISE EXCEPTION 'receipt % is %: only a pending receipt fails', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = 'failed', http_status = p_http_status, error_code = p_error_code, settled_at = v_now
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, 'failed', v_receipt.arguments IS NOT NULL);
END;
$$;

COMMENT ON FUNCTION convo.fail_receipt(uuid, int, text) IS 'Mark a pending receipt failed with an HTTP-style status and error code.';

-- fill_receipt: the model's arguments, checked against the tool version
-- frozen at begin_receipt (422 invalid_arguments), then against the route's
-- own values: every top-level key of p_expected must match (422
-- arg_mismatch, a model retargeting a ticket). Past the deadline the receipt
-- fails with 504 deadline_exceeded. The arguments are kept either way.
CREATE OR REPLACE FUNCTION convo.fill_receipt(p_receipt_id uuid, p_arguments jsonb, p_expected jsonb DEFAULT '{}')
RETURNS TABLE (status text, http_status int, error_code text)
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
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_code    text;
    v_now     timestamptz;
BEGIN
    IF p_arguments IS NULL OR p_expected IS NULL OR jsonb_typeof(p_expected) <> 'object' THEN
        RAISE EXCEPTION 'p_arguments and p_expected (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    PERFORM convo_private.check_size('p_arguments', p_arguments, convo.max_request_bytes());
    PERFORM convo_private.check_size('p_expected', p_expected, convo.max_request_bytes());
    -- A repeat is the same text (canonical arguments): 500 and 500.0 differ.
    IF v_receipt.arguments::text = p_arguments::text AND v_receipt.expected::text = p_expected::text THEN
        RETURN QUERY SELECT v_receipt.status, v_receipt.http_status, v_receipt.error_code;
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' OR v_receipt.arguments IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % is % with its arguments filled: it is filled once', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;

    v_now := clock_timestamp();
    v_code := CASE
        WHEN v_now > v_receipt.deadline_at THEN 'deadline_exceeded'
        ELSE convo_private.receipt_arguments_error(v_receipt.tool_name, v_receipt.tool_version, p_arguments, p_expected)
    END;
    UPDATE convo.tool_receipts r
       SET arguments = p_arguments, expected = p_expected, arguments_valid = (v_code IS NULL),
           filled_at = v_now,
           status = CASE WHEN v_code IS NULL THEN 'pending' ELSE 'failed' END,
           http_status = CASE WHEN v_code IS NULL THEN NULL WHEN v_code = 'deadline_exceeded' THEN 504 ELSE 422 END,
           error_code = v_code,
           settled_at = CASE WHEN v_code IS NOT NULL THEN v_now END
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id
    RETURNING r.status, r.http_status, r.error_code INTO v_receipt.status, v_receipt.http_status, v_receipt.error_code;
    PERFORM convo_private.notify_receipt(p_receipt_id, v_receipt.status, true);
    RETURN QUERY SELECT v_receipt.status, v_receipt.http_status, v_receipt.error_code;
END;
$$;

COMMENT ON FUNCTION convo.fill_receipt(uuid, jsonb, jsonb) IS
    'Check a receipt''s arguments: frozen schema (422 invalid_arguments), then the route''s values (422 arg_mismatch).';

-- head_at: the head at an instant, read from the head log (the last move at
-- or before p_at); NULL if the conversation had no head yet.
CREATE OR REPLACE FUNCTION convo.head_at(p_conversation_id uuid, p_at timestamptz)
RETURNS uuid
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
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'p_at is required' USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN (SELECT l.head_message_id
              FROM convo.conversation_head_log l
             WHERE l.conversation_id = p_conversation_id AND l.moved_at <= p_at
             ORDER BY l.moved_at DESC, l.seq DESC
             LIMIT 1);
END;
$$;

COMMENT ON FUNCTION convo.head_at(uuid, timestamptz) IS
    'The head at instant p_at, from the head log; NULL before the first head.';

-- head_history: every head movement of a conversation, oldest first.
CREATE OR REPLACE FUNCTION convo.head_history(p_conversation_id uuid)
RETURNS TABLE (seq bigint, head_message_id uuid, previous_head_id uuid, moved_at timestamptz,
               moved_by text, reason text)
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
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    RETURN QUERY
    SELECT l.seq, l.head_message_id, l.previous_head_id, l.moved_at, l.moved_by, l.reason
      FROM convo.conversation_head_log l
     WHERE l.conversation_id = p_conversation_id
     ORDER BY l.seq;
END;
$$;

COMMENT ON FUNCTION convo.head_history(uuid) IS
    'Every head movement of the conversation, oldest first (the append-only head log).';

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
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
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

-- import_history: one conversation of another product's export, as
-- import_chatgpt, import_openwebui or import_librechat import it (p_format
-- 'chatgpt', 'openwebui' or 'librechat'; CV011 for another), and what the
-- import did, so that a caller need not re-derive it: the conversation's
-- id, whether this call created it (false: a repeat, which writes nothing),
-- the source's own id it was imported under (the source key: the export's
-- id, else 'sha:' and the md5 of the JSON), the messages it holds from the
-- import, the message-less source nodes kept verbatim
-- (metadata.import.dropped_nodes), and its title.
CREATE OR REPLACE FUNCTION convo.import_history(p_format text, p_owner_id text, p_source jsonb)
RETURNS TABLE (conversation_id uuid, source_key text, created boolean, messages int, nodes_kept int, title text)
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
AS $$
DECLARE
    v_start timestamptz := clock_timestamp();
    v_id    uuid;
BEGIN
    v_id := CASE p_format
        WHEN 'chatgpt' THEN convo.import_chatgpt(p_owner_id, p_source)
        WHEN 'openwebui' THEN convo.import_openwebui(p_owner_id, p_source)
        WHEN 'librechat' THEN convo.import_librechat(p_owner_id, p_source) END;
    IF v_id IS NULL THEN
        RAISE EXCEPTION 'unknown import format %', coalesce(quote_literal(p_format), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Formats are chatgpt, openwebui and librechat.';
    END IF;
    -- Created by this call: its import record is no older than the call
    -- (a repeat returns an earlier import's conversation and writes none).
    RETURN QUERY
    SELECT c.id, i.source_key, i.imported_at >= v_start,
           (SELECT count(*)::int FROM convo.messages m WHERE m.conversation_id = c.id AND m.import_id = i.id),
           (SELECT count(*)::int
              FROM jsonb_object_keys(CASE WHEN jsonb_typeof(c.metadata -> 'import' -> 'dropped_nodes') = 'object'
                                          THEN c.metadata -> 'import' -> 'dropped_nodes' ELSE '{}' END)),
           c.title
      FROM convo.conversations c
      JOIN convo.imports i ON i.conversation_id = c.id AND i.format = p_format AND i.import_id IS NULL
     WHERE c.id = v_id
     ORDER BY i.imported_at DESC
     LIMIT 1;
END;
$$;

COMMENT ON FUNCTION convo.import_history(text, text, jsonb) IS
    'Import one conversation of a ChatGPT, Open WebUI or LibreChat export (p_format) and say what was done: id, source key, created or a repeat, messages, nodes kept, title.';

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
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
AS $$
DECLARE
    v_messages  jsonb := p_conversation -> 'messages';
    v_recursive boolean;
    v_source    text;
    v_id        uuid;
    v_digest    text;
    v_existing  uuid;
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
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('librechat', 'LibreChat conversation', p_owner_id,
                                    convo_private.nonempty_text(p_conversation -> 'conversationId'), p_conversation) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'librechat', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
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

    RETURN convo_private.import_tree(v_id, p_owner_id, 'librechat', v_source, v_digest, v_nodes, NULL, v_time,
        jsonb_build_object('format', 'librechat', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'messages', 'requested_head', 'null'::jsonb),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_librechat(text, jsonb) IS
    'Import one LibreChat conversation export (recursive or flat; parentMessageId, the latest leaf as the head); a repeat returns the same id.';

-- import_openwebui: one Open WebUI chat (a row of its chat table or of the
-- UI's JSON export, which holds an object "chat", or the bare chat column)
-- as a new conversation of p_owner_id, by the rules of docs/importing.md
-- ("The rules"): history.messages by parentId (several roots when the first message
-- was edited; childrenIds that disagree with parentId are only counted),
-- history.currentId as the head, each message kept verbatim in
-- import_origins. Repeats, CV009, CV011 and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_openwebui(p_owner_id text, p_chat jsonb)
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
AS $$
DECLARE
    v_row      jsonb;
    v_chat     jsonb;
    v_messages jsonb;
    v_current  jsonb;
    v_source   text;
    v_id       uuid;
    v_digest   text;
    v_existing uuid;
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
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('openwebui', 'Open WebUI chat', p_owner_id,
                                    coalesce(convo_private.nonempty_text(v_row -> 'id'),
                                             convo_private.nonempty_text(v_chat -> 'id')), p_chat) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'openwebui', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
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

    RETURN convo_private.import_tree(v_id, p_owner_id, 'openwebui', v_source, v_digest, v_messages,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        coalesce(convo_private.epoch_time(v_row -> 'created_at', 1e11), convo_private.epoch_time(v_chat -> 'timestamp', 1e11)),
        jsonb_build_object('format', 'openwebui', 'source_id', v_source,
                           'title', coalesce(nullif(v_row -> 'title', 'null'), v_chat -> 'title'),
                           'chat', v_chat - 'history' - 'messages', 'row', v_row - 'chat',
                           'requested_head', coalesce(v_current, 'null')),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_openwebui(text, jsonb) IS
    'Import one Open WebUI chat (history.messages by parentId, currentId as the head); a repeat returns the same id.';

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
    PERFORM convo_private.write_messages(p_conversation_id, v_head, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                         p_message_id, p_reason, p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. One statement checks the owner (sees_owner, CV002 otherwise,
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
AS $$
DECLARE
    v_seen     boolean;
    v_branches uuid[];  -- the segments, root first: each branch
    v_depths   int[];   -- and the deepest of it on the path
    v_forks    jsonb;   -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    SELECT true,
           (SELECT array_agg(l.branch_id ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = c.id),
           (SELECT array_agg(l.max_depth ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = c.id),
           (SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n)
              FROM (SELECT f.parent_id, max(f.sibling_index) AS n
                      FROM convo.messages f
                     WHERE f.conversation_id = c.id AND f.sibling_index > 1
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
AS $$
BEGIN
    RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at), p_at);
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';

-- register_tool: the allowlist, kept by the DBA. A version once registered
-- is frozen: the same settings return the latest version, other settings
-- make the next one. The schema is checked here (check_args_schema), so a
-- keyword outside the supported subset is refused and never silently ignored.
CREATE OR REPLACE FUNCTION convo.register_tool(
    p_name              text,
    p_effectful         boolean,
    p_args_schema       jsonb,
    p_idempotency_scope text DEFAULT 'tool_call',
    p_deadline          interval DEFAULT '20 seconds',
    p_amount_arg        text DEFAULT NULL,
    p_currency_arg      text DEFAULT NULL)
RETURNS int
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
AS $$
DECLARE
    v_latest convo.tools;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$' THEN
        RAISE EXCEPTION 'invalid tool name %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', coalesce(quote_literal(p_name), 'NULL')),
                  HINT = 'A tool name is 1 to 128 characters of A-Z, a-z, 0-9, _, . and -, not starting with a digit.';
    END IF;
    IF p_effectful IS NULL OR p_args_schema IS NULL OR p_deadline IS NULL OR p_idempotency_scope IS NULL THEN
        RAISE EXCEPTION 'p_effectful, p_args_schema, p_idempotency_scope and p_deadline are required'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name);
    END IF;
    IF p_idempotency_scope NOT IN ('tool_call', 'conversation_args', 'fork_args') THEN
        RAISE EXCEPTION 'unknown idempotency scope %', quote_literal(p_idempotency_scope)
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name), HINT = 'Scopes are tool_call, conversation_args and fork_args.';
    END IF;
    IF p_deadline <= interval '0' THEN
        RAISE EXCEPTION 'the deadline must be positive' USING ERRCODE = 'CV011', DETAIL = format('tool %s, deadline %s', p_name, p_deadline);
    END IF;
    PERFORM convo_private.check_size('the argument schema', p_args_schema, convo.max_request_bytes());
    PERFORM convo_private.check_args_schema(p_args_schema);
    IF (p_amount_arg IS NOT NULL OR p_currency_arg IS NOT NULL) AND NOT p_effectful THEN
        RAISE EXCEPTION 'only an effectful tool has amount and currency arguments'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name);
    END IF;
    IF p_amount_arg IS NOT NULL AND NOT coalesce(p_args_schema -> 'properties' ? p_amount_arg, false)
       OR p_currency_arg IS NOT NULL AND NOT coalesce(p_args_schema -> 'properties' ? p_currency_arg, false) THEN
        RAISE EXCEPTION 'the amount and currency arguments must be properties of the schema'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s, amount %s, currency %s', p_name, p_amount_arg, p_currency_arg);
    END IF;

    -- Versions of one tool are numbered under a lock on its name.
    PERFORM pg_advisory_xact_lock(hashtext('convo.tools'), hashtext(p_name));
    SELECT * INTO v_latest FROM convo.tools t WHERE t.name = p_name ORDER BY t.version DESC LIMIT 1;
    IF FOUND AND v_latest.effectful = p_effectful AND v_latest.args_schema::text = p_args_schema::text
       AND v_latest.idempotency_scope = p_idempotency_scope
       -- '1 day' and '24 hours' compare equal but differ across a DST change: compare as written.
       AND v_latest.deadline::text = p_deadline::text
       AND v_latest.amount_arg IS NOT DISTINCT FROM p_amount_arg
       AND v_latest.currency_arg IS NOT DISTINCT FROM p_currency_arg THEN
        RETURN v_latest.version;
    END IF;
    -- Under REPEATABLE READ a version another transaction committed while
    -- this one waited for the lock is invisible here: ON CONFLICT then fails
    -- with a retryable 40001, never a 23505.
    INSERT INTO convo.tools (name, version, effectful, args_schema, idempotency_scope, deadline, amount_arg, currency_arg)
    VALUES (p_name, coalesce(v_latest.version, 0) + 1, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
            p_amount_arg, p_currency_arg)
    ON CONFLICT (name, version) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tool % got a new version from another transaction: retry', p_name
            USING ERRCODE = 'serialization_failure', DETAIL = format('tool %s, version %s', p_name, coalesce(v_latest.version, 0) + 1);
    END IF;
    RETURN coalesce(v_latest.version, 0) + 1;
END;
$$;

COMMENT ON FUNCTION convo.register_tool(text, boolean, jsonb, text, interval, text, text) IS
    'Allowlist a tool: frozen argument schema (JSON Schema subset), idempotency scope, deadline; returns its version.';

-- request_digest: the SHA-256, in lower-case hex, of request_messages' body
-- in its canonical text, jsonb's own output (keys in jsonb's order, one
-- space after each colon and comma), as UTF-8: what an application passes
-- to begin_generation(p_request_digest => ...), so an audit can tell
-- whether a reply was made from exactly the stored path.
CREATE OR REPLACE FUNCTION convo.request_digest(
    p_conversation_id uuid,
    p_message_id      uuid DEFAULT NULL,
    p_format          text DEFAULT 'openai')
RETURNS text
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
AS $$
BEGIN
    RETURN encode(sha256(convert_to(convo.request_messages(p_conversation_id, p_message_id, p_format)::text, 'UTF8')), 'hex');
END;
$$;

COMMENT ON FUNCTION convo.request_digest(uuid, uuid, text) IS
    'SHA-256 (hex) of request_messages'' jsonb text: the p_request_digest of begin_generation, for auditing a reply against the stored path.';

-- request_messages: the path from the root to p_message_id (default the
-- head) as a provider's request messages, the body a generation is made
-- from. openai: the Chat Completions messages array; a message's tool
-- results become tool messages of their own, ahead of the rest of it (a
-- tool message's other parts become a user message). anthropic: {"system",
-- "messages"} as the Messages API takes it: system messages' text joined
-- into system (omitted when there is none; anything else in a system
-- message is CV011), tool messages user turns, consecutive turns of one role
-- merged into one, tool_result blocks first in a user turn. Parts render by
-- request_part. One owner check, the path read once.
CREATE OR REPLACE FUNCTION convo.request_messages(
    p_conversation_id uuid,
    p_message_id      uuid DEFAULT NULL,
    p_format          text DEFAULT 'openai')
RETURNS jsonb
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
AS $$
DECLARE
    v_last  uuid;
    v_body  jsonb;
    v_stray uuid;
BEGIN
    IF p_format IS NULL OR p_format NOT IN ('openai', 'anthropic') THEN
        RAISE EXCEPTION 'unknown request format %', coalesce(quote_literal(p_format), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id),
                  HINT = 'Formats are openai and anthropic.';
    END IF;
    v_last := (convo_private.conversation_ref(p_conversation_id)).head_message_id;
    IF p_message_id IS NOT NULL THEN
        v_last := (convo_private.message_ref(p_conversation_id, p_message_id)).id;
    END IF;

    IF p_format = 'openai' THEN
        WITH p AS MATERIALIZED (SELECT * FROM convo_private.path_parts(p_conversation_id, v_last))
        SELECT coalesce(jsonb_agg(o.message ORDER BY o.depth, o.sub NULLS LAST), '[]') INTO v_body
          FROM (SELECT p.depth, p.part_ordinal AS sub, convo_private.request_part(p.part, 'openai') AS message
                  FROM p WHERE p.part ->> 'type' = 'tool_result'
                UNION ALL
                SELECT g.depth, NULL,
                       jsonb_build_object('role', CASE g.role WHEN 'tool' THEN 'user' ELSE g.role END,
                                          'content', CASE WHEN jsonb_array_length(g.content) = 1
                                                           AND g.content -> 0 ->> 'type' = 'text'
                                                          THEN g.content -> 0 -> 'text' ELSE g.content END)
                       || CASE WHEN g.tool_calls IS NULL THEN '{}'
                               ELSE jsonb_build_object('tool_calls', g.tool_calls) END
                  FROM (SELECT p.depth, p.role,
                               jsonb_agg(convo_private.request_part(p.part, 'openai') ORDER BY p.part_ordinal)
                                   FILTER (WHERE p.part ->> 'type' <> 'tool_use') AS content,
                               jsonb_agg(convo_private.request_part(p.part, 'openai') ORDER BY p.part_ordinal)
                                   FILTER (WHERE p.part ->> 'type' = 'tool_use') AS tool_calls
                          FROM p WHERE p.part ->> 'type' <> 'tool_result'
                         GROUP BY p.depth, p.role) g) o;
        RETURN v_body;
    END IF;

    WITH p AS MATERIALIZED (SELECT * FROM convo_private.path_parts(p_conversation_id, v_last)),
    -- Each message outside the system prompt, with its role in the API.
    msgs AS (SELECT p.depth, CASE p.role WHEN 'assistant' THEN 'assistant' ELSE 'user' END AS role
               FROM p WHERE p.role <> 'system' GROUP BY p.depth, p.role),
    -- A turn is a run of messages of one role: it starts where the role changes.
    turns AS (SELECT s.depth, s.role,
                     sum(CASE WHEN s.role IS DISTINCT FROM s.before THEN 1 ELSE 0 END) OVER (ORDER BY s.depth) AS turn
                FROM (SELECT msgs.depth, msgs.role, lag(msgs.role) OVER (ORDER BY msgs.depth) AS before FROM msgs) s)
    SELECT jsonb_build_object('messages', coalesce((
               SELECT jsonb_agg(jsonb_build_object('role', b.role, 'content', b.content) ORDER BY b.turn)
                 FROM (SELECT t.turn, min(t.role) AS role,
                              jsonb_agg(convo_private.request_part(p.part, 'anthropic')
                                        ORDER BY p.part ->> 'type' <> 'tool_result', p.depth, p.part_ordinal) AS content
                         FROM turns t JOIN p ON p.depth = t.depth
                        GROUP BY t.turn) b), '[]'))
           || coalesce((SELECT jsonb_build_object('system', string_agg(p.part ->> 'text', E'\n\n' ORDER BY p.depth, p.part_ordinal))
                          FROM p WHERE p.role = 'system' AND p.part ->> 'type' = 'text' HAVING count(*) > 0), '{}'),
           (SELECT p.message_id FROM p WHERE p.role = 'system' AND p.part ->> 'type' <> 'text' ORDER BY p.depth LIMIT 1)
      INTO v_body, v_stray;
    IF v_stray IS NOT NULL THEN
        RAISE EXCEPTION 'the anthropic format takes only text in a system message'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, message %s', p_conversation_id, v_stray),
                  HINT = 'The Messages API''s system is text; put the attachment in a user message.';
    END IF;
    RETURN v_body;
END;
$$;

COMMENT ON FUNCTION convo.request_messages(uuid, uuid, text) IS
    'The path root to p_message_id (default the head) as a provider''s request messages: openai (Chat Completions) or anthropic (Messages).';

-- self_check: every invariant a DBA can verify on a live database, one row
-- per check, ok or not with the offenders (the first 10) in detail. It reads
-- every row of the package once per check (foreign_keys_hold: each table once
-- per foreign key it holds): run it from a maintenance job or `migrate
-- verify`, not from a request.
CREATE OR REPLACE FUNCTION convo.self_check()
RETURNS TABLE (check_name text, ok boolean, detail text)
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
AS $$
DECLARE
    v_bad   text[];
    v_found text[];
    v_key   record;
BEGIN
    -- Triggers: each of the package's present and ENABLE ALWAYS (so neither
    -- session_replication_role nor a plain ENABLE skips it), by what it
    -- guards; a view's trigger present and enabled (a view cannot be
    -- written in replica mode anyway: its INSERT writes nothing).
    FOR check_name, v_bad IN
        SELECT CASE g.guards WHEN 'row_security' THEN 'rule' ELSE g.guards END, array_agg(g.table_name || '.' || g.trigger_name || ' '
                                   || CASE WHEN tg.oid IS NULL THEN 'missing' ELSE 'enabled=' || tg.tgenabled::text END
                                   ORDER BY g.table_name, g.trigger_name)
                             FILTER (WHERE tg.oid IS NULL OR (tg.tgenabled <> 'A' AND NOT (rel.relkind = 'v' AND tg.tgenabled = 'O')))
          FROM convo_private.package_triggers() g
          LEFT JOIN pg_class rel ON rel.oid = to_regclass('convo.' || g.table_name)
          LEFT JOIN pg_trigger tg ON tg.tgname = g.trigger_name AND tg.tgrelid = rel.oid
         GROUP BY 1
    LOOP
        check_name := CASE check_name WHEN 'append_only' THEN 'append_only_triggers'
                                      WHEN 'head_log' THEN 'head_log_trigger' ELSE 'rule_triggers' END;
        ok := v_bad IS NULL;
        detail := coalesce(array_to_string(v_bad[1:10], '; '), 'all present, enabled always');
        RETURN NEXT;
    END LOOP;

    -- Every table of convo refuses TRUNCATE, which row-level security does
    -- not bind (a role granted it would empty every owner's rows at once):
    -- one of the package's ENABLE ALWAYS triggers fires on it.
    SELECT array_agg(c.relname::text ORDER BY c.relname) INTO v_bad
      FROM pg_class c
     WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('r', 'p')
       AND NOT EXISTS (SELECT 1 FROM pg_trigger tg
                        JOIN convo_private.package_triggers() g ON g.table_name = c.relname AND g.trigger_name = tg.tgname
                       WHERE tg.tgrelid = c.oid AND tg.tgenabled = 'A' AND tg.tgtype & 32 <> 0);
    RETURN QUERY SELECT 'truncate_refused', v_bad IS NULL,
                        coalesce('no trigger refuses TRUNCATE on ' || array_to_string(v_bad, ', '),
                                 'every table refuses TRUNCATE');

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

    -- Every foreign key of the package holds on every row: a head, a
    -- head-log row, a parent, a generation's prompt names a message of its
    -- own conversation, an effect its tool version, and so on. A session in
    -- session_replication_role = replica skips foreign-key checks (the
    -- guards, ENABLE ALWAYS, still run), as does a superuser's DISABLE
    -- TRIGGER ALL: a row that got past shows here. One anti-join a key, read
    -- from the catalog, so a key added later is covered.
    v_bad := NULL;
    FOR v_key IN
        SELECT con.conname, con.conrelid::regclass::text AS child, con.confrelid::regclass::text AS parent,
               string_agg(quote_ident(ca.attname), ', ' ORDER BY k.n) AS child_cols,
               string_agg(quote_ident(pa.attname), ', ' ORDER BY k.n) AS parent_cols,
               string_agg('c.' || quote_ident(ca.attname), ', ' ORDER BY k.n) AS c_cols,
               string_agg('p.' || quote_ident(pa.attname), ', ' ORDER BY k.n) AS p_cols
          FROM pg_constraint con
         CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k (child_att, parent_att, n)
          JOIN pg_attribute ca ON ca.attrelid = con.conrelid AND ca.attnum = k.child_att
          JOIN pg_attribute pa ON pa.attrelid = con.confrelid AND pa.attnum = k.parent_att
         WHERE con.contype = 'f' AND con.connamespace = 'convo'::regnamespace
         GROUP BY con.oid, con.conname, con.conrelid, con.confrelid
         ORDER BY 2, 1
    LOOP
        -- A key with a NULL column references nothing (MATCH SIMPLE).
        EXECUTE format('SELECT array_agg(%L || '' = '' || x.k || '' names no row of '' || %L ORDER BY x.k)
                          FROM (SELECT ROW(%s)::text AS k FROM %s c
                                 WHERE ROW(%s) IS NOT NULL
                                   AND NOT EXISTS (SELECT 1 FROM %s p WHERE (%s) = (%s))
                                 ORDER BY 1 LIMIT 10) x',
                       v_key.child || ' (' || v_key.child_cols || ')', v_key.parent || ' (' || v_key.parent_cols || ')',
                       v_key.c_cols, v_key.child, v_key.c_cols, v_key.parent, v_key.p_cols, v_key.c_cols)
           INTO v_found;
        v_bad := v_bad || v_found;
    END LOOP;
    RETURN QUERY SELECT 'foreign_keys_hold', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every reference names its row');

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

    -- Every view a role other than its owner may read shows it only its
    -- own rows, EXPLAIN included. A view running as its owner and filtering
    -- by owner in its WHERE clause is not enough, even as a
    -- security_barrier: the planner pushes a caller's leakproof condition
    -- (=, <, >= on a uuid, a number, a text) down to a table scan below the
    -- owner filter, and EXPLAIN ANALYZE's row counts there count every
    -- owner's rows. So such a view is a security_barrier over functions
    -- only (PL/pgSQL, which take no caller's condition and show EXPLAIN
    -- nothing of what they read), reading no table itself; or a
    -- security_invoker view whose tables' policies give each reader every
    -- row or none (USING (true)): under a policy that filters, a leakproof
    -- condition that becomes an index condition shows its count from
    -- before the policy's filter just as well.
    SELECT array_agg(v.relname || ' (' || v.why || ')' ORDER BY v.relname) INTO v_bad FROM (
        SELECT c.relname::text AS relname,
               CASE WHEN invoker THEN 'security_invoker over a table whose policies filter rows'
                    WHEN barrier THEN 'security_barrier reading a table itself'
                    ELSE 'neither security_barrier nor security_invoker' END AS why,
               barrier, invoker, reads_table, filtered
          FROM pg_class c
         CROSS JOIN LATERAL (
               SELECT coalesce(bool_or(o.option_name = 'security_barrier' AND o.option_value::boolean), false) AS barrier,
                      coalesce(bool_or(o.option_name = 'security_invoker' AND o.option_value::boolean), false) AS invoker
                 FROM pg_options_to_table(c.reloptions) o) opt
         CROSS JOIN LATERAL (
               SELECT coalesce(bool_or(t.relkind IN ('r', 'p', 'v', 'm', 'f')), false) AS reads_table,
                      coalesce(bool_or(EXISTS (SELECT 1 FROM pg_policy pol
                                                WHERE pol.polrelid = t.oid
                                                  AND pg_get_expr(pol.polqual, pol.polrelid) IS DISTINCT FROM 'true')), false) AS filtered
                 FROM pg_rewrite rw
                 JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = rw.oid
                                 AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> c.oid
                 JOIN pg_class t ON t.oid = d.refobjid
                WHERE rw.ev_class = c.oid) dep
         WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind = 'v'
           AND (EXISTS (SELECT 1 FROM aclexplode(c.relacl) a
                         WHERE a.grantee <> c.relowner AND a.privilege_type = 'SELECT')
                OR EXISTS (SELECT 1 FROM pg_attribute att CROSS JOIN LATERAL aclexplode(att.attacl) a
                            WHERE att.attrelid = c.oid AND a.grantee <> c.relowner AND a.privilege_type = 'SELECT'))) v
     WHERE NOT ((v.invoker AND NOT v.filtered) OR (NOT v.invoker AND v.barrier AND NOT v.reads_table));
    RETURN QUERY SELECT 'views_security_barrier', v_bad IS NULL,
                        coalesce('readable by other roles, and a reader''s conditions or EXPLAIN reach rows it may not read: '
                                 || array_to_string(v_bad, ', '),
                                 'every view other roles read is a security barrier over functions, or reads with the reader''s rights under policies that filter nothing');

    -- Every SECURITY DEFINER function of the package pins search_path, and
    -- turns off each setting any session may SET that would print what runs
    -- inside it to that session (with client_min_messages = log): the parse,
    -- rewritten and plan trees, whose constants are the values the function
    -- read (another owner's ids, the keyed digests of the caller's input);
    -- trace_sort's sizes; PL/pgSQL's parameters of a failed INTO STRICT, and
    -- its extra checks (too_many_rows would warn or fail on how many rows a
    -- lookup found, whoever's they are).
    SELECT array_agg(p.oid::regprocedure::text || ' lacks ' || array_to_string(m.missing, ', ')
                     ORDER BY p.oid::regprocedure::text) INTO v_bad
      FROM pg_proc p
     CROSS JOIN LATERAL (
           SELECT array_agg(w.setting ORDER BY w.setting) AS missing
             FROM unnest(ARRAY['search_path=pg_catalog, pg_temp', 'debug_print_parse=off', 'debug_print_rewritten=off',
                               'debug_print_plan=off', 'trace_sort=off', 'plpgsql.print_strict_params=off',
                               'plpgsql.extra_warnings=none', 'plpgsql.extra_errors=none']) AS w (setting)
            WHERE NOT (w.setting = ANY (coalesce(p.proconfig, '{}')))) m
     WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND p.prosecdef
       AND m.missing IS NOT NULL;
    RETURN QUERY SELECT 'definer_settings', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '),
                                 'every SECURITY DEFINER function pins search_path and prints nothing of what it runs');

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

-- set_title: a conversation's title (NULL clears it), as a sidebar shows it.
-- After the owner check and the conversation's lock, the title changes and
-- the change is logged (who, when, from what: convo.conversation_changes),
-- never in place without a trace; the same title again changes and logs
-- nothing. CV010 over max_title_length characters.
CREATE OR REPLACE FUNCTION convo.set_title(p_conversation_id uuid, p_title text)
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
AS $$
DECLARE
    v_old text;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    IF length(p_title) > convo_private.max_title_length() THEN
        RAISE EXCEPTION 'a title is at most % characters', convo_private.max_title_length()
            USING ERRCODE = 'CV010',
                  DETAIL = format('conversation %s, a title of %s characters', p_conversation_id, length(p_title));
    END IF;
    SELECT c.title INTO v_old FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF v_old IS DISTINCT FROM p_title THEN
        UPDATE convo.conversations c SET title = p_title WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_change(p_conversation_id, 'title', v_old, p_title, convo_private.caller(), NULL);
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.set_title(uuid, text) IS
    'Set (or with NULL clear) a conversation''s title; every change is logged (who, when, old and new). CV010 over 1,000 characters.';

-- settle_effect: records the outside service's answer: pending to applied
-- (with its external reference) or failed (with an error code). An exact
-- repeat is a no-op; anything else on a settled effect raises CV006.
CREATE OR REPLACE FUNCTION convo.settle_effect(
    p_conversation_id uuid,
    p_effect_id       uuid,
    p_state           text,
    p_external_ref    text DEFAULT NULL,
    p_http_status     int DEFAULT NULL,
    p_error_code      text DEFAULT NULL,
    p_evidence        jsonb DEFAULT '{}')
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
AS $$
DECLARE
    v_effect convo.tool_effects;
    v_now    timestamptz;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_state IS NULL OR p_state NOT IN ('applied', 'failed') THEN
        RAISE EXCEPTION 'an effect settles as applied or failed, not %', coalesce(quote_literal(p_state), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_state = 'applied' AND (p_external_ref IS NULL OR p_external_ref = '' OR p_error_code IS NOT NULL) THEN
        RAISE EXCEPTION 'an applied effect needs p_external_ref and no error code'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_state = 'failed' AND (p_error_code IS NULL OR p_error_code = '' OR p_external_ref IS NOT NULL) THEN
        RAISE EXCEPTION 'a failed effect needs p_error_code and no external reference (put it in p_evidence)'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_http_status IS NOT NULL AND p_http_status NOT BETWEEN 100 AND 599 THEN
        RAISE EXCEPTION 'p_http_status % is not an HTTP status', p_http_status
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, effect %s', p_conversation_id, p_effect_id);
    END IF;
    IF p_evidence IS NULL THEN
        RAISE EXCEPTION 'p_evidence is required (''{}'' for none)'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, effect %s', p_conversation_id, p_effect_id);
    END IF;
    IF length(p_external_ref) > convo.max_ref_length() OR length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'an external reference or error code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('effect %s', p_effect_id);
    END IF;
    PERFORM convo_private.check_size('evidence', p_evidence, convo.max_detail_bytes());

    -- An exact repeat of a settlement is a no-op, also after the effect moved
    -- on (applied, then compensated: the settlement's columns stay as they
    -- were). A rejection or a decline was no settlement: settling one is CV006.
    IF (v_effect.state = p_state OR (p_state = 'applied' AND v_effect.state = 'compensated'))
       AND v_effect.external_ref IS NOT DISTINCT FROM p_external_ref
       AND v_effect.http_status IS NOT DISTINCT FROM p_http_status
       AND v_effect.error_code IS NOT DISTINCT FROM p_error_code
       AND EXISTS (SELECT 1 FROM convo.tool_effect_events ev
                    WHERE ev.conversation_id = p_conversation_id AND ev.effect_id = p_effect_id
                      AND ev.from_state = 'pending' AND ev.to_state = p_state) THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'pending' THEN
        RAISE EXCEPTION 'effect % is %: only a pending effect settles', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, asked %s', p_effect_id, v_effect.state, p_state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = p_state, external_ref = p_external_ref, http_status = p_http_status,
           error_code = p_error_code, settled_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'pending', p_state, convo_private.caller(), p_evidence);
END;
$$;

COMMENT ON FUNCTION convo.settle_effect(uuid, uuid, text, text, int, text, jsonb) IS
    'Settle a pending effect: applied (with the external reference) or failed (with an error code); evidence is logged.';

-- unarchive_conversation: shows an archived conversation in
-- conversations() again; logged like archive_conversation.
CREATE OR REPLACE FUNCTION convo.unarchive_conversation(p_conversation_id uuid)
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
AS $$
BEGIN
    PERFORM convo_private.set_archived(p_conversation_id, false);
END;
$$;

COMMENT ON FUNCTION convo.unarchive_conversation(uuid) IS
    'Show an archived conversation in conversations() again (logged: who, when). A repeat changes nothing.';

-- conversations_head_guard: a head moved outside pgconvo's code names a
-- message of its own conversation (message_ref: CV003 for a message of
-- another conversation the caller sees, CV002 for one it does not see, or
-- none). The foreign key says the same, but a session in
-- session_replication_role = replica (a role a DBA let SET it, no superuser
-- needed) skips foreign keys, and not this ENABLE ALWAYS trigger; the head
-- log and the live path then record only heads it let through. pgconvo's
-- own moves name a message they have just found or written, and skip it in
-- its WHEN. SECURITY DEFINER: a role granted UPDATE alone meets the rule,
-- not a missing privilege. It runs for every UPDATE outside pgconvo's
-- code: the writer may write for the conversation's owner (lock_conversation,
-- CV002); a role row-level security binds was refused before
-- (conversations_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.conversations_head_guard()
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
AS $$
BEGIN
    -- The writer's owner's conversation (writes_owner, CV002 otherwise),
    -- as messages_guard: a head, title or archive state of another owner's
    -- is not a repair role's to change.
    PERFORM convo_private.lock_conversation(OLD.id);
    -- An unset head is conversations_guard's to refuse.
    IF NEW.head_message_id IS NOT NULL AND NEW.head_message_id IS DISTINCT FROM OLD.head_message_id THEN
        PERFORM convo_private.message_ref(NEW.id, NEW.head_message_id);
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

-- log_direct_head_move: a head moved by an UPDATE outside pgconvo's code (a
-- superuser, or a role a DBA gave UPDATE) is logged like any move
-- (log_head_move: the head log, the live path, the notification), as
-- direct_update by the caller, whatever settings the session holds.
-- SECURITY DEFINER: it writes the history tables as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.log_direct_head_move()
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
AS $$
BEGIN
    PERFORM convo_private.log_head_move(NEW.id, NEW.head_message_id, OLD.head_message_id, 'direct_update',
                                        convo_private.caller(), NULL);
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

-- orphaned_applied_effects_rows: the rows of the view
-- convo.orphaned_applied_effects (applied effects none of whose tool calls
-- sits on the path from the root to its conversation's current head), the
-- caller's owner's only (sees_owner: every owner for convo_reader).
-- Reachability is computed, never stored, so a later branch switch cannot
-- make it wrong. A PL/pgSQL function, so that no condition of a caller's
-- reaches its scans: the planner pushes a leakproof condition (=, <, >= on
-- a uuid, a number, a text) through a security_barrier view down to the
-- table scans below the view's owner filter, and EXPLAIN ANALYZE's actual
-- row counts there would count, and so read by halving, every owner's rows.
-- A function scan shows nothing of what it reads. SECURITY DEFINER: the
-- reader holds no table privilege.
CREATE OR REPLACE FUNCTION convo_private.orphaned_applied_effects_rows()
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, external_ref text, amount_minor bigint,
               currency char(3), settled_at timestamptz, tool_call_ids text[])
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
AS $$
BEGIN
    RETURN QUERY
    SELECT e.conversation_id, e.id, e.tool_name, e.external_ref, e.amount_minor, e.currency, e.settled_at,
           ARRAY(SELECT l.tool_call_id FROM convo.tool_effect_calls l
                  WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
                  ORDER BY l.decided_at)
      FROM convo.tool_effects e
      JOIN convo.conversations c ON c.id = e.conversation_id
     WHERE e.state = 'applied'
       AND convo_private.sees_owner(c.owner_id)
       AND NOT EXISTS (
            WITH RECURSIVE segments (branch_id, max_depth) AS (
                SELECT h.branch_id, h.depth
                  FROM convo.messages h
                 WHERE h.conversation_id = c.id AND h.id = c.head_message_id
                UNION ALL
                SELECT fork.branch_id, fork.depth
                  FROM segments s
                  JOIN convo.messages start ON start.conversation_id = c.id AND start.id = s.branch_id
                  JOIN convo.messages fork ON fork.conversation_id = c.id AND fork.id = start.parent_id
            )
            SELECT 1
              FROM convo.tool_effect_calls l
              JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
              JOIN segments s ON s.branch_id = m.branch_id AND m.depth <= s.max_depth
             WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id);
END;
$$;

-- refuse_row_security_bound: the trigger function that runs before the
-- guards which run as the owner role (SECURITY DEFINER) on a write made
-- outside pgconvo's code. Those guards fire before row-level security's
-- check, and would otherwise read rows and answer about them (a parent's
-- depth and time in a DETAIL, which conversation a message id is in, CV002
-- against 42501) to a role that policies let read and write none. A caller
-- (the role SET ROLE set, else the login role, as convo_private.caller
-- says) that is neither a superuser, nor BYPASSRLS, nor the tables' owner
-- role (whose sessions row-level security does not bind) is refused here
-- (42501), before any row is read: the package grants no policy to write,
-- so row-level security would refuse it anyway. It runs with the writer's
-- rights and reads the catalog only. Statement-level, so it refuses even
-- when no row matches.
CREATE OR REPLACE FUNCTION convo_private.refuse_row_security_bound()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_caller text := coalesce(nullif(current_setting('role'), 'none'), session_user::text);
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles r
                WHERE r.rolname = v_caller
                  AND (r.rolsuper OR r.rolbypassrls OR pg_has_role(r.oid, 'convo_owner', 'USAGE'))) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'row-level security lets role % write no row of convo.%', v_caller, TG_TABLE_NAME
        USING ERRCODE = '42501',
              DETAIL = format('table convo.%s, operation %s, role %s', TG_TABLE_NAME, TG_OP, v_caller),
              HINT = 'Write through the API (convo.*); a repair role needs BYPASSRLS.';
END;
$$;

-- stale_generations_rows: the rows of the view convo.stale_generations
-- (generations still streaming after generation_stale_after()), the
-- caller's owner's only (sees_owner). A PL/pgSQL function, SECURITY
-- DEFINER, like orphaned_applied_effects_rows: no condition of a caller's
-- reaches its scans, nor does EXPLAIN show them.
CREATE OR REPLACE FUNCTION convo_private.stale_generations_rows()
RETURNS TABLE (conversation_id uuid, generation_id uuid, model text, prompt_message_id uuid, started_at timestamptz)
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
AS $$
BEGIN
    RETURN QUERY
    SELECT g.conversation_id, g.id, g.model, g.prompt_message_id, g.started_at
      FROM convo.generations g
      JOIN convo.conversations c ON c.id = g.conversation_id
     WHERE g.state = 'streaming'
       AND g.started_at < clock_timestamp() - convo.generation_stale_after()
       AND convo_private.sees_owner(c.owner_id);
END;
$$;

-- stale_pending_effects_rows: the rows of the view
-- convo.stale_pending_effects (effects pending or awaiting confirmation
-- past their deadline), the caller's owner's only (sees_owner). A
-- PL/pgSQL function, SECURITY DEFINER, like orphaned_applied_effects_rows:
-- no condition of a caller's reaches its scans, nor does EXPLAIN show them.
CREATE OR REPLACE FUNCTION convo_private.stale_pending_effects_rows()
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, state text, idempotency_key text,
               requested_at timestamptz, deadline_at timestamptz)
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
AS $$
BEGIN
    RETURN QUERY
    SELECT e.conversation_id, e.id, e.tool_name, e.state, e.idempotency_key, e.requested_at, e.deadline_at
      FROM convo.tool_effects e
      JOIN convo.conversations c ON c.id = e.conversation_id
     WHERE e.state IN ('pending', 'awaiting_confirmation')
       AND e.deadline_at < clock_timestamp()
       AND convo_private.sees_owner(c.owner_id);
END;
$$;

-- tool_effects_log_direct: an effect created or moved outside pgconvo's
-- code (a superuser's repair, which the state machine still checks) gets
-- its event like any transition (effect_event), by the caller, with no
-- evidence. SECURITY DEFINER: it writes the event log as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_log_direct()
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
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition
    END IF;
    PERFORM convo_private.effect_event(NEW.conversation_id, NEW.id,
                                       CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
                                       convo_private.caller(), '{}');
    RETURN NULL;
END;
$$;

-- tool_receipts_transition: a receipt is filed pending and ends once, applied
-- or failed; its owner, key, tool and request never change, its arguments
-- are filled once and are valid only if they pass receipt_arguments_error,
-- and a settled receipt never changes (compared as text: jsonb's = calls 500
-- and 500.000 equal). CV006. It guards every write outside pgconvo's code
-- (whose entries, and erasure, write only such rows).
CREATE OR REPLACE FUNCTION convo_private.tool_receipts_transition()
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
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.arguments IS NOT NULL THEN
            RAISE EXCEPTION 'a receipt is filed pending and unfilled'
                USING ERRCODE = 'CV006', DETAIL = format('receipt %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF to_jsonb(NEW)::text = to_jsonb(OLD)::text THEN
        RETURN NEW;
    END IF;
    IF OLD.status <> 'pending'
       OR (NEW.id, NEW.owner_id, NEW.idempotency_key, NEW.tool_name, NEW.tool_version, NEW.request::text,
           NEW.request_digest, NEW.created_at, NEW.deadline_at)
          IS DISTINCT FROM
          (OLD.id, OLD.owner_id, OLD.idempotency_key, OLD.tool_name, OLD.tool_version, OLD.request::text,
           OLD.request_digest, OLD.created_at, OLD.deadline_at)
       OR (OLD.arguments IS NOT NULL
           AND (NEW.arguments::text, NEW.expected::text, NEW.arguments_valid, NEW.filled_at)
               IS DISTINCT FROM (OLD.arguments::text, OLD.expected::text, OLD.arguments_valid, OLD.filled_at)) THEN
        RAISE EXCEPTION 'receipt % is %: this change is not a transition it allows', OLD.id, OLD.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, %s to %s', OLD.id, OLD.status, NEW.status),
                  HINT = 'A receipt goes from pending to applied or failed, once; its arguments are filled once.';
    END IF;
    IF NEW.arguments_valid AND OLD.arguments IS NULL
       AND convo_private.receipt_arguments_error(NEW.tool_name, NEW.tool_version, NEW.arguments, NEW.expected) IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % arguments are marked valid but fail its tool version or the expected values', OLD.id
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, tool %s version %s', OLD.id, OLD.tool_name, OLD.tool_version);
    END IF;
    RETURN NEW;
END;
$$;

-- edit_and_resend: a user message's sibling (branch_reason 'user_edit'); the
-- head moves to it and the old subtree stays, unchanged, off the path.
CREATE OR REPLACE FUNCTION convo.edit_and_resend(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_new_message_id  uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS uuid
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
RETURN convo_private.add_sibling(p_conversation_id, p_message_id, p_parts, p_expected_head,
                         p_new_message_id, p_moved_by, 'user', 'user_edit');

COMMENT ON FUNCTION convo.edit_and_resend(uuid, uuid, jsonb, uuid, uuid, text) IS
    'Edit a user message: insert its sibling (branch_reason user_edit) and move the head to it; nothing is updated or deleted.';

-- regenerate: an assistant message's sibling (branch_reason 'regenerate');
-- the head moves to it and the old answer stays as an alternative.
CREATE OR REPLACE FUNCTION convo.regenerate(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_new_message_id  uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS uuid
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
RETURN convo_private.add_sibling(p_conversation_id, p_message_id, p_parts, p_expected_head,
                         p_new_message_id, p_moved_by, 'assistant', 'regenerate');

COMMENT ON FUNCTION convo.regenerate(uuid, uuid, jsonb, uuid, uuid, text) IS
    'Regenerate an assistant message: insert its sibling (branch_reason regenerate) and move the head to it.';

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

-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), by what it guards: append_only (refuse_change,
-- refuse_forgery), head_log (the conversation's guards and the logging of
-- direct head, title and archive updates), rule (the tree's and the
-- ledger's guards, the state machines) and row_security (a role row-level
-- security binds refused before the guards that run as the owner role read
-- a row for it). Each table's triggers are numbered
-- in the order they fire (PostgreSQL fires the triggers of one timing, event
-- and level by name): 05 whom row-level security binds, 10 and 11 who may write and what a new or changed row
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
        ('conversations', 'conversations_05_row_security', 'row_security'),
        ('conversations', 'conversations_10_guard', 'head_log'),
        ('conversations', 'conversations_11_new_guard', 'head_log'),
        ('conversations', 'conversations_12_head_guard', 'head_log'),
        ('conversations', 'conversations_20_log_direct', 'head_log'),
        ('conversations', 'conversations_21_log_direct_change', 'head_log'),
        ('conversations', 'conversations_90_no_delete', 'append_only'),
        ('conversation_changes', 'conversation_changes_10_no_forgery', 'append_only'),
        ('conversation_changes', 'conversation_changes_30_no_update', 'append_only'),
        ('conversation_changes', 'conversation_changes_90_append_only', 'append_only'),
        ('messages', 'messages_05_row_security', 'row_security'),
        ('messages', 'messages_20_guard', 'rule'),
        ('messages', 'messages_30_no_update', 'append_only'),
        ('messages', 'messages_90_append_only', 'append_only'),
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only'),
        ('keyed_parts', 'keyed_parts_20_guard', 'rule'),
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only'),
        ('live_path', 'live_path_10_no_forgery', 'append_only'),
        ('generations', 'generations_05_row_security', 'row_security'),
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

-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
-- It reads its rows through convo_private.orphaned_applied_effects_rows,
-- which filters by owner (the caller's convo.owner_id, or every owner for a
-- member of convo_reader) and, a PL/pgSQL function, takes no condition of
-- the caller's: a leakproof condition pushed down to a table scan below the
-- owner filter would have its every-owner row count shown by EXPLAIN
-- ANALYZE. security_barrier besides: the caller's own conditions run only
-- on the rows the view returns. Its readers need EXECUTE on that function
-- (a view's functions are called with the reader's rights); granted with
-- the view.
CREATE OR REPLACE VIEW convo.orphaned_applied_effects WITH (security_barrier = true) AS
SELECT r.conversation_id, r.effect_id, r.tool_name, r.external_ref, r.amount_minor,
       r.currency::char(3) AS currency, r.settled_at, r.tool_call_ids
  FROM convo_private.orphaned_applied_effects_rows() r;

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head (the caller''s owner, or all for convo_reader).';

-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream. Read
-- through convo_private.stale_generations_rows, filtered by owner, and a
-- security_barrier, like orphaned_applied_effects: no condition of the
-- caller's reaches a table scan, and its own run only on the rows it
-- returns.
CREATE OR REPLACE VIEW convo.stale_generations WITH (security_barrier = true) AS
SELECT r.conversation_id, r.generation_id, r.model, r.prompt_message_id, r.started_at
  FROM convo_private.stale_generations_rows() r;

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';

-- stale_pending_effects: effects still pending or awaiting confirmation past
-- their deadline, with the key a sweeper re-sends (or looks up) under. A
-- pending effect is "unknown", never "not done": it is not failed
-- automatically, only settled on evidence. Read through
-- convo_private.stale_pending_effects_rows, filtered by owner (the
-- caller's, or every owner for convo_reader), and a security_barrier, like
-- orphaned_applied_effects: no condition of the caller's reaches a table
-- scan, and its own run only on the rows it returns.
CREATE OR REPLACE VIEW convo.stale_pending_effects WITH (security_barrier = true) AS
SELECT r.conversation_id, r.effect_id, r.tool_name, r.state, r.idempotency_key, r.requested_at, r.deadline_at
  FROM convo_private.stale_pending_effects_rows() r;

COMMENT ON VIEW convo.stale_pending_effects IS
    'Effects pending or awaiting confirmation past their deadline, with the key to re-send or look up under.';

-- conversations_05_row_security: a role row-level security binds is refused
-- (42501, refuse_row_security_bound) before the guards, which run as the
-- owner role, read any row for it; pgconvo's own writes skip it in its WHEN.
CREATE OR REPLACE TRIGGER conversations_05_row_security
    BEFORE INSERT OR UPDATE ON convo.conversations
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_row_security_bound();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_05_row_security;

-- conversations_12_head_guard: a head moved outside pgconvo's code names a
-- message of its own conversation, in replica mode too (which skips the
-- foreign key), and every update outside pgconvo's code is the writer's
-- owner's; pgconvo's own updates skip it in its WHEN.
CREATE OR REPLACE TRIGGER conversations_12_head_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.conversations_head_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_12_head_guard;

-- generations_05_row_security: a role row-level security binds is refused
-- (42501, refuse_row_security_bound) before the guards, which run as the
-- owner role, read any row for it; pgconvo's own writes skip it in its WHEN.
CREATE OR REPLACE TRIGGER generations_05_row_security
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_row_security_bound();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_05_row_security;

-- live_path_10_no_forgery: the derived index of the live paths is written
-- only by pgconvo's code (log_head_move, move_live_path), or a superuser;
-- never emptied by TRUNCATE, which row-level security does not bind.
CREATE OR REPLACE TRIGGER live_path_10_no_forgery
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON convo.live_path
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.live_path ENABLE ALWAYS TRIGGER live_path_10_no_forgery;

-- messages_05_row_security: a role row-level security binds is refused
-- (42501, refuse_row_security_bound) before the guards, which run as the
-- owner role, read any row for it; pgconvo's own writes skip it in its WHEN.
CREATE OR REPLACE TRIGGER messages_05_row_security
    BEFORE INSERT ON convo.messages
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_row_security_bound();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_05_row_security;

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
