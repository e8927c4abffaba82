-- 0003_trust: nobody forges history or reads what is not theirs. Every object
-- moves to a NOLOGIN owner role; the machinery moves to a private schema; the
-- API runs as that owner (SECURITY DEFINER) and checks the caller's owner
-- once per call; history tables refuse every writer but pgconvo's own code.

-- The roles are cluster-wide: create the ones that are missing (a second
-- database on the same server, or an up after a down, finds them there).
-- convo_admin is a member of convo_app and convo_reader: it can do all they do.
DO $$
DECLARE
    v_role    text;
    v_missing text[] := ARRAY(SELECT r FROM unnest(ARRAY['convo_owner', 'convo_app', 'convo_reader', 'convo_admin']) r
                               WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r));
BEGIN
    IF cardinality(v_missing) > 0
       AND NOT (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'pgconvo needs the roles % and the migrating role % may not create roles',
                array_to_string(v_missing, ', '), current_user
            USING ERRCODE = 'insufficient_privilege',
                  HINT = format('Migrate as a superuser or a role with CREATEROLE, or have a superuser run: '
                                'CREATE ROLE convo_owner NOLOGIN; CREATE ROLE convo_app NOLOGIN; '
                                'CREATE ROLE convo_reader NOLOGIN; CREATE ROLE convo_admin NOLOGIN IN ROLE convo_app, convo_reader; '
                                'GRANT CREATE ON DATABASE %I TO convo_owner; GRANT convo_owner TO %I; '
                                'then migrate again, and REVOKE convo_owner FROM %I afterwards.',
                                current_database(), current_user, current_user);
    END IF;
    FOREACH v_role IN ARRAY v_missing LOOP
        EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
        EXECUTE format('COMMENT ON ROLE %I IS %L', v_role, CASE v_role
            WHEN 'convo_owner' THEN 'pgconvo: owns every object of the package; NOLOGIN, no login role is a member.'
            WHEN 'convo_app' THEN 'pgconvo: the application: the API and views, for the owner set by SET LOCAL convo.owner_id.'
            WHEN 'convo_reader' THEN 'pgconvo: reads every table and view across owners, and the read-only functions.'
            ELSE 'pgconvo: the DBA: convo_app and convo_reader, plus tools, sweeps and erasure across owners.' END);
    END LOOP;
    IF NOT pg_has_role('convo_admin', 'convo_app', 'MEMBER') THEN
        GRANT convo_app TO convo_admin;
    END IF;
    IF NOT pg_has_role('convo_admin', 'convo_reader', 'MEMBER') THEN
        GRANT convo_reader TO convo_admin;
    END IF;
END;
$$;


-- Act as the owner role. A migrating role that is not a superuser becomes a
-- member for this transaction only (it needs CREATEROLE for that) and gives
-- the membership back at the end, so no login role stays a member.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT convo_owner TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'pgconvo: the migrating role % cannot act as convo_owner', current_user
                USING ERRCODE = 'insufficient_privilege',
                      HINT = format('Migrate as a superuser or a role with CREATEROLE, or have a superuser run '
                                    '"GRANT convo_owner TO %I" first (and revoke it after migrating).', current_user);
        END;
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
    -- The owner role creates the private schema here and in later migrations.
    IF NOT has_database_privilege('convo_owner', current_database(), 'CREATE') THEN
        EXECUTE format('GRANT CREATE ON DATABASE %I TO convo_owner', current_database());
    END IF;
END;
$$;

-- Hand what 0001 and 0002 created (owned by the migrating role) to the owner
-- role: the schema first, then its relations (with their sequences and
-- indexes) and functions.
ALTER SCHEMA convo OWNER TO convo_owner;
DO $$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT c.oid::regclass AS name FROM pg_class c
              WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm') LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO convo_owner', v.name);
    END LOOP;
    FOR v IN SELECT p.oid::regprocedure AS name FROM pg_proc p WHERE p.pronamespace = 'convo'::regnamespace LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO convo_owner', v.name);
    END LOOP;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- The machinery: trigger functions, lookups, validators' internals. No role
-- but the owner may use it, and no function the owner creates from now on is
-- executable by PUBLIC unless apply_grants grants it.
CREATE SCHEMA convo_private;
COMMENT ON SCHEMA convo_private IS 'pgconvo''s machinery: only the owner role convo_owner uses it; the API is schema convo.';
ALTER DEFAULT PRIVILEGES FOR ROLE convo_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- A receipt's state and its HTTP status class agree, for every statement.
ALTER TABLE convo.tool_receipts ADD CONSTRAINT tool_receipts_status_class CHECK (
    (status <> 'applied' OR http_status BETWEEN 200 AND 299)
    AND (status <> 'failed' OR http_status BETWEEN 400 AND 599));

-- Row-level security on every owner-scoped table. The API functions run as
-- the owner role, which owns the tables and so is not bound by it: they
-- check the caller's owner once per call instead (sees_owner, writes_owner),
-- so the path costs what a flat read does. Every other role is bound: a role
-- given table privileges directly sees and writes nothing, convo_reader
-- reads every row.
DO $$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['conversations', 'messages', 'message_parts', 'conversation_head_log',
                                   'generations', 'tool_effects', 'tool_effect_calls', 'tool_effect_events',
                                   'tool_receipts'] LOOP
        EXECUTE format('ALTER TABLE convo.%I ENABLE ROW LEVEL SECURITY', v_table);
        EXECUTE format('CREATE POLICY %I ON convo.%I FOR SELECT TO convo_reader USING (true)',
                       v_table || '_reader_reads_all', v_table);
    END LOOP;
END;
$$;

-- Objects: the API in convo, the machinery in convo_private (current text
-- in sql/functions, sql/private, sql/views and sql/triggers).
-- alternatives: a message and its siblings, oldest first ("you previously
-- asked ..."): whether each is on the live path, and the most recently
-- created leaf below it, to switch to with move_head.
CREATE OR REPLACE FUNCTION convo.alternatives(p_conversation_id uuid, p_message_id uuid)
RETURNS TABLE (message_id uuid, branch_reason text, created_at timestamptz, on_head_path boolean,
               latest_leaf_id uuid)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head    uuid := (convo_private.conversation_ref(p_conversation_id)).head_message_id;
    v_message convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
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
    )
    SELECT s.id, s.branch_reason, s.created_at,
           convo_private.is_on_path(p_conversation_id, s.id, v_head),
           (SELECT b.id FROM below b
             WHERE b.sibling_id = s.id
               AND NOT EXISTS (SELECT 1 FROM convo.messages c
                                WHERE c.conversation_id = p_conversation_id AND c.parent_id = b.id)
             ORDER BY b.created_at DESC, b.id DESC
             LIMIT 1)
      FROM siblings s
     ORDER BY s.sibling_index;
END;
$$;

COMMENT ON FUNCTION convo.alternatives(uuid, uuid) IS
    'A message and its siblings, oldest first: whether each is on the live path, and its most recent leaf.';

-- append_message: a child of the current head (a root if there is none), and
-- the head moves to it. A repeat with the same p_message_id is recognised
-- before any other check and returns the first result, writing nothing.
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
AS $$
DECLARE
    v_head uuid := convo_private.lock_conversation(p_conversation_id);
    v_id   uuid := coalesce(p_message_id, gen_random_uuid());
BEGIN
    IF p_role IS NULL OR p_parts IS NULL THEN
        RAISE EXCEPTION 'p_role and p_parts are required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF convo_private.is_retry(p_conversation_id, p_message_id, p_role, p_parts, NULL, false) THEN
        RETURN p_message_id;
    END IF;
    PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts)
    VALUES (p_conversation_id, v_id, v_head, p_role, p_parts);
    PERFORM convo_private.move_head_to(p_conversation_id, v_id, 'append', p_moved_by);
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
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
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
    UPDATE convo.tool_receipts r
       SET status = 'applied', result_ref = p_result_ref, http_status = p_http_status, settled_at = clock_timestamp()
     WHERE r.id = p_receipt_id;
END;
$$;

COMMENT ON FUNCTION convo.apply_receipt(uuid, text, int) IS
    'Mark a pending, validly filled receipt applied; run it in the mutation''s own transaction to make the two atomic.';

-- args_errors: validates a JSON value against an argument schema (the
-- subset check_args_schema admits) inside the database. Returns one line per
-- failure, naming the JSON path and the rule ("$.amount_minor: minimum 1"),
-- or an empty array when the value is valid.
CREATE OR REPLACE FUNCTION convo.args_errors(p_schema jsonb, p_value jsonb, p_path text DEFAULT '$')
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_errors text[] := '{}';
    v_type   text := jsonb_typeof(p_value);
    v_types  jsonb;
    v_num    numeric;
    v_len    int;
    v_key    text;
    v_sub    jsonb;
    v_i      int;
BEGIN
    IF v_type = 'number' THEN
        v_num := p_value::text::numeric;
    END IF;
    IF p_schema ? 'type' THEN
        v_types := CASE jsonb_typeof(p_schema -> 'type') WHEN 'array' THEN p_schema -> 'type'
                                                         ELSE jsonb_build_array(p_schema -> 'type') END;
        IF NOT (v_types ? v_type OR (v_type = 'number' AND v_types ? 'integer' AND v_num = trunc(v_num))) THEN
            RETURN ARRAY[format('%s: type: expected %s, got %s', p_path,
                                array_to_string(ARRAY(SELECT jsonb_array_elements_text(v_types)), ' or '), v_type)];
        END IF;
    END IF;
    IF p_schema ? 'const' AND p_value <> p_schema -> 'const' THEN
        v_errors := v_errors || format('%s: const: must be %s', p_path, p_schema -> 'const');
    END IF;
    IF p_schema ? 'enum' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_schema -> 'enum') e WHERE e = p_value) THEN
        v_errors := v_errors || format('%s: enum: must be one of %s', p_path, p_schema -> 'enum');
    END IF;

    IF v_type = 'string' THEN
        v_len := length(p_value #>> '{}');
        IF v_len < (p_schema ->> 'minLength')::numeric THEN
            v_errors := v_errors || format('%s: minLength %s', p_path, p_schema -> 'minLength');
        END IF;
        IF v_len > (p_schema ->> 'maxLength')::numeric THEN
            v_errors := v_errors || format('%s: maxLength %s', p_path, p_schema -> 'maxLength');
        END IF;
        IF p_schema ? 'pattern' AND NOT (p_value #>> '{}') ~ (p_schema ->> 'pattern') THEN
            v_errors := v_errors || format('%s: pattern %s', p_path, p_schema -> 'pattern');
        END IF;
    ELSIF v_type = 'number' THEN
        IF v_num < (p_schema ->> 'minimum')::numeric THEN
            v_errors := v_errors || format('%s: minimum %s', p_path, p_schema -> 'minimum');
        END IF;
        IF v_num > (p_schema ->> 'maximum')::numeric THEN
            v_errors := v_errors || format('%s: maximum %s', p_path, p_schema -> 'maximum');
        END IF;
    ELSIF v_type = 'array' THEN
        v_len := jsonb_array_length(p_value);
        IF v_len < (p_schema ->> 'minItems')::numeric THEN
            v_errors := v_errors || format('%s: minItems %s', p_path, p_schema -> 'minItems');
        END IF;
        IF v_len > (p_schema ->> 'maxItems')::numeric THEN
            v_errors := v_errors || format('%s: maxItems %s', p_path, p_schema -> 'maxItems');
        END IF;
        IF p_schema ? 'items' THEN
            FOR v_sub, v_i IN SELECT e.value, e.ordinality - 1 FROM jsonb_array_elements(p_value) WITH ORDINALITY e LOOP
                v_errors := v_errors || convo.args_errors(p_schema -> 'items', v_sub, format('%s[%s]', p_path, v_i));
            END LOOP;
        END IF;
    ELSIF v_type = 'object' THEN
        FOR v_key IN SELECT jsonb_array_elements_text(p_schema -> 'required') LOOP
            IF NOT p_value ? v_key THEN
                v_errors := v_errors || format('%s: required', convo_private.json_path(p_path, v_key));
            END IF;
        END LOOP;
        FOR v_key, v_sub IN SELECT * FROM jsonb_each(p_value) LOOP
            IF p_schema -> 'properties' ? v_key THEN
                v_errors := v_errors || convo.args_errors(p_schema -> 'properties' -> v_key, v_sub, convo_private.json_path(p_path, v_key));
            ELSIF p_schema -> 'additionalProperties' = 'false' THEN
                v_errors := v_errors || format('%s: additionalProperties: not allowed', convo_private.json_path(p_path, v_key));
            END IF;
        END LOOP;
    END IF;
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
           OR v_existing.params <> p_params OR v_existing.request_digest IS DISTINCT FROM p_request_digest THEN
            RAISE EXCEPTION 'generation id % is already used for a different generation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('generation %s, conversation %s', v_id, p_conversation_id);
        END IF;
        RETURN v_id;
    END IF;
    PERFORM convo_private.message_ref(p_conversation_id, p_prompt_message_id);
    PERFORM convo_private.check_size('p_params', p_params, convo.max_detail_bytes());
    IF length(p_request_digest) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_request_digest is longer than % characters', convo.max_ref_length() USING ERRCODE = 'CV010';
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
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' OR p_request IS NULL OR p_tool_name IS NULL THEN
        RAISE EXCEPTION 'p_owner_id, p_tool_name and p_request are required' USING ERRCODE = 'CV011';
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
    v_digest := encode(sha256(convert_to(p_request::text, 'UTF8')), 'hex');

    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    IF NOT FOUND THEN
        v_tool := convo_private.tool_ref(p_tool_name);
        INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest, deadline_at)
        VALUES (gen_random_uuid(), p_owner_id, p_idempotency_key, v_tool.name, v_tool.version, p_request, v_digest,
                clock_timestamp() + v_tool.deadline)
        ON CONFLICT (owner_id, idempotency_key) DO NOTHING
        RETURNING * INTO v_receipt;
        IF FOUND THEN
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

-- cancel_generation: streaming to cancelled (the user pressed stop). A
-- repeat is a no-op; anything else on an ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.cancel_generation(p_conversation_id uuid, p_generation_id uuid)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
    UPDATE convo.generations g
       SET state = 'cancelled', finished_at = clock_timestamp()
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
AS $$
DECLARE
    v_effect convo.tool_effects;
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
    PERFORM convo_private.set_effect_context(session_user, p_evidence);
    UPDATE convo.tool_effects e
       SET state = 'compensated', compensated_by = p_compensated_by, compensated_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
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
AS $$
DECLARE
    v_head       uuid := convo_private.lock_conversation(p_conversation_id);
    v_generation convo.generations := convo_private.generation_ref(p_conversation_id, p_generation_id);
    v_message    uuid := gen_random_uuid();
    v_reason     text;
BEGIN
    IF p_parts IS NULL OR p_usage IS NULL OR jsonb_typeof(p_usage) <> 'object' THEN
        RAISE EXCEPTION 'p_parts and p_usage (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF v_generation.state = 'completed' AND v_generation.usage = p_usage
       AND v_generation.finish_reason IS NOT DISTINCT FROM p_finish_reason
       AND (SELECT m.parts FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_generation.message_id) = p_parts THEN
        RETURN v_generation.message_id;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation completes', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    PERFORM convo_private.check_size('p_usage', p_usage, convo.max_detail_bytes());
    IF length(p_finish_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_finish_reason is longer than % characters', convo.max_ref_length() USING ERRCODE = 'CV010';
    END IF;
    -- 'regenerate' when the prompt already has an answer; messages_fill_tree
    -- makes any other later child a 'branch'.
    v_reason := CASE WHEN EXISTS (SELECT 1 FROM convo.messages c
                                   WHERE c.conversation_id = p_conversation_id
                                     AND c.parent_id = v_generation.prompt_message_id
                                     AND c.role = 'assistant') THEN 'regenerate' END;
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts)
    VALUES (p_conversation_id, v_message, v_generation.prompt_message_id, 'assistant', v_reason, p_parts);
    UPDATE convo.generations g
       SET state = 'completed', message_id = v_message, usage = p_usage, finish_reason = p_finish_reason,
           finished_at = clock_timestamp()
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
    -- A head moved away and back again counts as unmoved: the user is looking
    -- at the prompt the answer is for.
    IF v_head IS NOT DISTINCT FROM v_generation.head_at_begin THEN
        PERFORM convo_private.move_head_to(p_conversation_id, v_message,
                                   CASE WHEN v_reason = 'regenerate' THEN 'regenerate' ELSE 'append' END, NULL);
    END IF;
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
AS $$
DECLARE
    v_effect convo.tool_effects;
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
    PERFORM convo_private.set_effect_context(p_confirmed_by, '{}');
    UPDATE convo.tool_effects e
       SET state = 'pending',
           idempotency_key = 'rerun:' || e.id || ':of:' || e.repeats_effect_id,
           confirmed_by = p_confirmed_by,
           confirmed_at = clock_timestamp(),
           deadline_at = clock_timestamp() + (SELECT t.deadline FROM convo.tools t
                                               WHERE t.name = e.tool_name AND t.version = e.tool_version)
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
END;
$$;

COMMENT ON FUNCTION convo.confirm_effect(uuid, uuid, text) IS
    'Confirm a held re-run: awaiting_confirmation to pending under a key of its own naming the effect it repeats.';

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
AS $$
DECLARE
    v_id       uuid := coalesce(p_conversation_id, gen_random_uuid());
    v_existing convo.conversations;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011';
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not create conversations for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'p_metadata must be a JSON object' USING ERRCODE = 'CV011';
    END IF;
    IF octet_length(p_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s bytes', octet_length(p_metadata::text));
    END IF;

    INSERT INTO convo.conversations (id, owner_id, metadata)
    VALUES (v_id, p_owner_id, p_metadata)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- A retry: the same owner, metadata and system prompt return the first result.
        -- Locked without lock_conversation's owner check: another owner's id is CV009, not CV002.
        SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata IS DISTINCT FROM p_metadata
           OR (SELECT m.parts FROM convo.messages m
                WHERE m.conversation_id = v_id AND m.parent_id IS NULL AND m.sibling_index = 1
                  AND m.role = 'system') IS DISTINCT FROM v_parts THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        RETURN v_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        INSERT INTO convo.messages (conversation_id, id, role, parts) VALUES (v_id, v_root, 'system', v_parts);
        PERFORM convo_private.move_head_to(v_id, v_root, 'create', NULL);
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
AS $$
DECLARE
    v_effect convo.tool_effects;
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
    PERFORM convo_private.set_effect_context(p_declined_by, '{}');
    UPDATE convo.tool_effects e
       SET state = 'failed', error_code = 'declined', settled_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
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
AS $$
DECLARE
    v_tool_name text;
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    IF p_tool_call_id IS NULL THEN
        RAISE EXCEPTION 'p_tool_call_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT p.tool_name INTO v_tool_name FROM convo.message_parts p
     WHERE p.conversation_id = p_conversation_id AND p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id;
    IF NOT FOUND THEN
        PERFORM convo_private.raise_not_found('tool call', p_tool_call_id, p_conversation_id,
            (SELECT p.conversation_id FROM convo.message_parts p
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

-- expire_receipts: the sweeper: pending receipts past their tool's deadline
-- fail with 504 deadline_exceeded, so none stays pending forever. Returns
-- how many it failed.
CREATE OR REPLACE FUNCTION convo.expire_receipts(p_now timestamptz DEFAULT clock_timestamp())
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count int;
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'p_now is required' USING ERRCODE = 'CV011';
    END IF;
    UPDATE convo.tool_receipts r
       SET status = 'failed', http_status = 504, error_code = 'deadline_exceeded', settled_at = clock_timestamp()
     WHERE r.status = 'pending' AND r.deadline_at < p_now;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION convo.expire_receipts(timestamptz) IS
    'Fail pending receipts past their tool''s deadline with 504 deadline_exceeded; returns the count.';

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
AS $$
DECLARE
    v_generation convo.generations;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_generation := convo_private.generation_ref(p_conversation_id, p_generation_id);
    IF p_error_code IS NULL OR p_error_code = '' OR p_error IS NULL THEN
        RAISE EXCEPTION 'p_error_code and p_error are required' USING ERRCODE = 'CV011',
            DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length() USING ERRCODE = 'CV010';
    END IF;
    PERFORM convo_private.check_size('p_error', p_error, convo.max_detail_bytes());
    IF v_generation.state = 'failed' AND v_generation.error_code = p_error_code AND v_generation.error = p_error THEN
        RETURN;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation fails', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    UPDATE convo.generations g
       SET state = 'failed', error_code = p_error_code, error = p_error, finished_at = clock_timestamp()
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
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
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
    UPDATE convo.tool_receipts r
       SET status = 'failed', http_status = p_http_status, error_code = p_error_code, settled_at = clock_timestamp()
     WHERE r.id = p_receipt_id;
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
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_code    text;
BEGIN
    IF p_arguments IS NULL OR p_expected IS NULL OR jsonb_typeof(p_expected) <> 'object' THEN
        RAISE EXCEPTION 'p_arguments and p_expected (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    PERFORM convo_private.check_size('p_arguments', p_arguments, convo.max_request_bytes());
    PERFORM convo_private.check_size('p_expected', p_expected, convo.max_request_bytes());
    IF v_receipt.arguments = p_arguments AND v_receipt.expected = p_expected THEN
        RETURN QUERY SELECT v_receipt.status, v_receipt.http_status, v_receipt.error_code;
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' OR v_receipt.arguments IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % is % with its arguments filled: it is filled once', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;

    v_code := CASE
        WHEN clock_timestamp() > v_receipt.deadline_at THEN 'deadline_exceeded'
        ELSE convo_private.receipt_arguments_error(v_receipt.tool_name, v_receipt.tool_version, p_arguments, p_expected)
    END;
    UPDATE convo.tool_receipts r
       SET arguments = p_arguments, expected = p_expected, arguments_valid = (v_code IS NULL),
           filled_at = clock_timestamp(),
           status = CASE WHEN v_code IS NULL THEN 'pending' ELSE 'failed' END,
           http_status = CASE WHEN v_code IS NULL THEN NULL WHEN v_code = 'deadline_exceeded' THEN 504 ELSE 422 END,
           error_code = v_code,
           settled_at = CASE WHEN v_code IS NOT NULL THEN clock_timestamp() END
     WHERE r.id = p_receipt_id
    RETURNING r.status, r.http_status, r.error_code INTO v_receipt.status, v_receipt.http_status, v_receipt.error_code;
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
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'p_at is required' USING ERRCODE = 'CV011';
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

-- move_head: a branch switch: the head names any message of the conversation.
-- p_reason is free text in lower snake case; 'create' and 'direct_update'
-- are kept for the database's own log rows.
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
            USING ERRCODE = 'CV011',
                  HINT = 'A reason is 1 to 63 characters of a-z, 0-9 and _, starting with a letter; create and direct_update are reserved.';
    END IF;
    v_head := convo_private.lock_conversation(p_conversation_id);
    PERFORM convo_private.message_ref(p_conversation_id, p_message_id);
    PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    PERFORM convo_private.move_head_to(p_conversation_id, p_message_id, p_reason, p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. CV002 for an unknown conversation; empty before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM convo_private.path_from(p_conversation_id,
                                  (convo_private.conversation_ref(p_conversation_id)).head_message_id);
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"); empty if there was no head yet.
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM convo_private.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at));
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
AS $$
DECLARE
    v_latest convo.tools;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$' THEN
        RAISE EXCEPTION 'invalid tool name %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'CV011', HINT = 'A tool name is 1 to 128 characters of A-Z, a-z, 0-9, _, . and -, not starting with a digit.';
    END IF;
    IF p_effectful IS NULL OR p_args_schema IS NULL OR p_deadline IS NULL OR p_idempotency_scope IS NULL THEN
        RAISE EXCEPTION 'p_effectful, p_args_schema, p_idempotency_scope and p_deadline are required'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name);
    END IF;
    IF p_idempotency_scope NOT IN ('tool_call', 'conversation_args', 'fork_args') THEN
        RAISE EXCEPTION 'unknown idempotency scope %', quote_literal(p_idempotency_scope)
            USING ERRCODE = 'CV011', HINT = 'Scopes are tool_call, conversation_args and fork_args.';
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
    IF FOUND AND v_latest.effectful = p_effectful AND v_latest.args_schema = p_args_schema
       AND v_latest.idempotency_scope = p_idempotency_scope
       -- '1 day' and '24 hours' compare equal but differ across a DST change: compare as written.
       AND v_latest.deadline::text = p_deadline::text
       AND v_latest.amount_arg IS NOT DISTINCT FROM p_amount_arg
       AND v_latest.currency_arg IS NOT DISTINCT FROM p_currency_arg THEN
        RETURN v_latest.version;
    END IF;
    INSERT INTO convo.tools (name, version, effectful, args_schema, idempotency_scope, deadline, amount_arg, currency_arg)
    VALUES (p_name, coalesce(v_latest.version, 0) + 1, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
            p_amount_arg, p_currency_arg);
    RETURN coalesce(v_latest.version, 0) + 1;
END;
$$;

COMMENT ON FUNCTION convo.register_tool(text, boolean, jsonb, text, interval, text, text) IS
    'Allowlist a tool: frozen argument schema (JSON Schema subset), idempotency scope, deadline; returns its version.';

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
                        'tool_effects', 'tool_effect_calls', 'tool_effect_events', 'tool_receipts']) AS t (name)
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
AS $$
DECLARE
    v_effect convo.tool_effects;
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
        RAISE EXCEPTION 'p_http_status % is not an HTTP status', p_http_status USING ERRCODE = 'CV011';
    END IF;
    IF p_evidence IS NULL THEN
        RAISE EXCEPTION 'p_evidence is required (''{}'' for none)' USING ERRCODE = 'CV011';
    END IF;
    IF length(p_external_ref) > convo.max_ref_length() OR length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'an external reference or error code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('effect %s', p_effect_id);
    END IF;
    PERFORM convo_private.check_size('evidence', p_evidence, convo.max_detail_bytes());

    IF v_effect.state = p_state AND v_effect.external_ref IS NOT DISTINCT FROM p_external_ref
       AND v_effect.http_status IS NOT DISTINCT FROM p_http_status
       AND v_effect.error_code IS NOT DISTINCT FROM p_error_code THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'pending' THEN
        RAISE EXCEPTION 'effect % is %: only a pending effect settles', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, asked %s', p_effect_id, v_effect.state, p_state);
    END IF;
    PERFORM convo_private.set_effect_context(session_user, p_evidence);
    UPDATE convo.tool_effects e
       SET state = p_state, external_ref = p_external_ref, http_status = p_http_status,
           error_code = p_error_code, settled_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
END;
$$;

COMMENT ON FUNCTION convo.settle_effect(uuid, uuid, text, text, int, text, jsonb) IS
    'Settle a pending effect: applied (with the external reference) or failed (with an error code); evidence is logged.';

-- add_sibling: the shared write path of edit_and_resend and regenerate: a new
-- message beside an existing one (same parent), the head moved to it. No
-- existing row changes; the old subtree simply stops being on the path.
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
    IF convo_private.is_retry(p_conversation_id, p_new_message_id, p_role, p_parts, v_original.parent_id, true) THEN
        RETURN p_new_message_id;
    END IF;
    PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    IF v_original.role <> p_role THEN
        RAISE EXCEPTION '% takes a message of role %; message % has role %',
                CASE p_branch_reason WHEN 'user_edit' THEN 'edit_and_resend' ELSE 'regenerate' END,
                p_role, p_message_id, v_original.role
            USING ERRCODE = 'CV004', DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id);
    END IF;
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts)
    VALUES (p_conversation_id, v_id, v_original.parent_id, p_role, p_branch_reason, p_parts);
    PERFORM convo_private.move_head_to(p_conversation_id, v_id, p_branch_reason, p_moved_by);
    RETURN v_id;
END;
$$;

-- apply_grants: makes the catalog grant exactly documented_grants: revokes
-- every other privilege (PUBLIC's default EXECUTE included), then grants
-- what is missing. Run by each migration that adds or changes an object, as
-- the owner role; idempotent.
CREATE OR REPLACE FUNCTION convo_private.apply_grants()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT * FROM convo_private.granted_privileges()
             EXCEPT SELECT * FROM convo_private.documented_grants() LOOP
        EXECUTE format('REVOKE %s ON %s %s FROM %s', v.privilege, v.object_kind, v.object_name,
                       CASE v.grantee WHEN 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(v.grantee) END);
    END LOOP;
    FOR v IN SELECT * FROM convo_private.documented_grants()
             EXCEPT SELECT * FROM convo_private.granted_privileges() LOOP
        EXECUTE format('GRANT %s ON %s %s TO %I', v.privilege, v.object_kind, v.object_name, v.grantee);
    END LOOP;
END;
$$;

-- check_args_schema: refuses (CV011) an argument schema that uses anything
-- outside the supported JSON Schema subset, so that nothing a schema says is
-- silently left unchecked. Annotations are accepted and ignored.
CREATE OR REPLACE FUNCTION convo_private.check_args_schema(p_schema jsonb, p_path text DEFAULT '$')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key   text;
    v_value jsonb;
    v_bad   text;
BEGIN
    IF jsonb_typeof(p_schema) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'schema at % must be a JSON object', p_path USING ERRCODE = 'CV011';
    END IF;
    FOR v_key, v_value IN SELECT * FROM jsonb_each(p_schema) LOOP
        v_bad := NULL;
        CASE v_key
        WHEN 'title', 'description', '$comment', 'examples', 'default' THEN
            NULL;
        WHEN 'type' THEN
            IF NOT coalesce((CASE jsonb_typeof(v_value)
                                 WHEN 'string' THEN jsonb_build_array(v_value)
                                 WHEN 'array' THEN v_value END)
                            <@ '["object", "array", "string", "integer", "number", "boolean", "null"]', false)
               OR v_value = '[]' THEN
                v_bad := 'a type name or a non-empty list of them';
            END IF;
        WHEN 'properties' THEN
            IF jsonb_typeof(v_value) <> 'object' THEN
                v_bad := 'an object of schemas';
            ELSE
                PERFORM convo_private.check_args_schema(e.value, convo_private.json_path(p_path || '.properties', e.key))
                   FROM jsonb_each(v_value) e;
            END IF;
        WHEN 'items' THEN
            PERFORM convo_private.check_args_schema(v_value, p_path || '.items');
        WHEN 'required' THEN
            IF jsonb_typeof(v_value) <> 'array'
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(v_value) e WHERE jsonb_typeof(e) <> 'string') THEN
                v_bad := 'a list of property names';
            END IF;
        WHEN 'additionalProperties' THEN
            IF jsonb_typeof(v_value) <> 'boolean' THEN
                v_bad := 'true or false (schemas are not supported here)';
            END IF;
        WHEN 'enum' THEN
            IF jsonb_typeof(v_value) <> 'array' OR jsonb_array_length(v_value) = 0 THEN
                v_bad := 'a non-empty list of values';
            END IF;
        WHEN 'const' THEN
            NULL;
        WHEN 'minLength', 'maxLength', 'minItems', 'maxItems' THEN
            IF jsonb_typeof(v_value) <> 'number' OR v_value::text::numeric < 0
               OR v_value::text::numeric <> trunc(v_value::text::numeric) THEN
                v_bad := 'a non-negative integer';
            END IF;
        WHEN 'minimum', 'maximum' THEN
            IF jsonb_typeof(v_value) <> 'number' THEN
                v_bad := 'a number';
            END IF;
        WHEN 'pattern' THEN
            IF jsonb_typeof(v_value) <> 'string' THEN
                v_bad := 'a string';
            ELSE
                BEGIN
                    PERFORM '' ~ (v_value #>> '{}');
                EXCEPTION WHEN invalid_regular_expression THEN
                    v_bad := 'a valid PostgreSQL regular expression';
                END;
            END IF;
        ELSE
            RAISE EXCEPTION 'unsupported JSON Schema keyword "%" at %', v_key, p_path
                USING ERRCODE = 'CV011',
                      HINT = 'Supported: type, properties, required, additionalProperties (boolean), enum, const, '
                          || 'minLength, maxLength, pattern, minimum, maximum, items, minItems, maxItems; '
                          || 'annotations title, description, $comment, examples, default.';
        END CASE;
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'JSON Schema keyword "%" at % must be %', v_key, p_path, v_bad
                USING ERRCODE = 'CV011', DETAIL = format('%s: %s', v_key, v_value);
        END IF;
    END LOOP;
END;
$$;

-- check_expected_head: the compare-and-set of a write. When the caller names
-- the head it expects and the head has moved, CV001 names the current head.
CREATE OR REPLACE FUNCTION convo_private.check_expected_head(p_conversation_id uuid, p_expected_head uuid, p_current_head uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_expected_head IS NOT NULL AND p_expected_head IS DISTINCT FROM p_current_head THEN
        RAISE EXCEPTION 'the head of conversation % has moved', p_conversation_id
            USING ERRCODE = 'CV001',
                  DETAIL = format('expected head %s, current head %s', p_expected_head, coalesce(p_current_head::text, 'none'));
    END IF;
END;
$$;

-- check_parts: the checks on a message's parts as a whole (present, a
-- non-empty array, under the message cap), with the contract's SQLSTATEs;
-- each part is checked by message_parts_check.
CREATE OR REPLACE FUNCTION convo_private.check_parts(p_parts jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011';
    END IF;
    IF jsonb_typeof(p_parts) <> 'array' THEN
        RAISE EXCEPTION 'p_parts must be a JSON array, not %', jsonb_typeof(p_parts) USING ERRCODE = 'CV008';
    END IF;
    IF jsonb_array_length(p_parts) = 0 THEN
        RAISE EXCEPTION 'p_parts must not be empty' USING ERRCODE = 'CV008';
    END IF;
    IF octet_length(p_parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'a message is larger than % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s bytes', octet_length(p_parts::text));
    END IF;
END;
$$;

-- check_size: raises CV010 when a JSON value is larger than its cap (in
-- bytes of jsonb's text form), naming what it was; NULL passes.
CREATE OR REPLACE FUNCTION convo_private.check_size(p_what text, p_value jsonb, p_cap int)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NOT NULL AND octet_length(p_value::text) > p_cap THEN
        RAISE EXCEPTION '% is larger than % bytes', p_what, p_cap
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', p_what, octet_length(p_value::text));
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
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_conversation FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF NOT FOUND OR NOT convo_private.sees_owner(v_conversation.owner_id) THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_conversation;
END;
$$;

-- conversations_guard: of a conversation only the head (and, for erasure,
-- the metadata) may change; its id, owner and creation time are fixed, and
-- a head once set is never unset (the head always names a message).
-- It runs as the role that issued the UPDATE (not SECURITY DEFINER), so it
-- can tell pgconvo's own move (current_user convo_owner, reason and mover
-- named by move_head_to) from any other: that one is marked direct_update by
-- session_user here, whatever settings the session holds, for log_head_move.
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
    IF NEW.head_message_id IS DISTINCT FROM OLD.head_message_id AND current_user <> 'convo_owner' THEN
        PERFORM set_config('convo.head_reason', 'direct_update', true);
        PERFORM set_config('convo.head_moved_by', session_user, true);
    END IF;
    RETURN NEW;
END;
$$;

-- effect_ref: the effect a call names, locked for its transition. CV003 if
-- it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo_private.effect_ref(p_conversation_id uuid, p_effect_id uuid)
RETURNS convo.tool_effects
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_effect convo.tool_effects;
BEGIN
    IF p_effect_id IS NULL THEN
        RAISE EXCEPTION 'p_effect_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_effect FROM convo.tool_effects e
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_effect;
    END IF;
    PERFORM convo_private.raise_not_found('effect', p_effect_id::text, p_conversation_id,
        (SELECT e.conversation_id FROM convo.tool_effects e WHERE e.id = p_effect_id LIMIT 1));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- generation_ref: the generation a call names, locked for its transition.
-- CV003 if it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo_private.generation_ref(p_conversation_id uuid, p_generation_id uuid)
RETURNS convo.generations
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_generation convo.generations;
BEGIN
    IF p_generation_id IS NULL THEN
        RAISE EXCEPTION 'p_generation_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_generation FROM convo.generations g
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_generation;
    END IF;
    PERFORM convo_private.raise_not_found('generation', p_generation_id::text, p_conversation_id,
        (SELECT g.conversation_id FROM convo.generations g WHERE g.id = p_generation_id LIMIT 1));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- generations_transition: a generation starts streaming and ends once:
-- streaming to completed, failed or cancelled, and an ended generation never
-- changes; its identity (prompt, model, params, digest, start) never changes
-- at all, and its answer is an assistant child of its prompt. CV006.
CREATE OR REPLACE FUNCTION convo_private.generations_transition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'streaming' THEN
            RAISE EXCEPTION 'a generation starts streaming, not %', NEW.state
                USING ERRCODE = 'CV006', DETAIL = format('generation %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.conversation_id, NEW.id, NEW.prompt_message_id, NEW.head_at_begin, NEW.model, NEW.params,
        NEW.request_digest, NEW.started_at)
       IS DISTINCT FROM
       (OLD.conversation_id, OLD.id, OLD.prompt_message_id, OLD.head_at_begin, OLD.model, OLD.params,
        OLD.request_digest, OLD.started_at) THEN
        RAISE EXCEPTION 'a generation''s prompt, model, params, digest and start never change'
            USING ERRCODE = 'CV006', DETAIL = format('generation %s', OLD.id);
    END IF;
    IF to_jsonb(NEW) <> to_jsonb(OLD) AND NOT (OLD.state = 'streaming' AND NEW.state IN ('completed', 'failed', 'cancelled')) THEN
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

-- is_on_path: whether a message sits on the path from the root to p_head_id
-- (is the head or one of its ancestors), by the same branch walk as path.
CREATE OR REPLACE FUNCTION convo_private.is_on_path(p_conversation_id uuid, p_message_id uuid, p_head_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1
          FROM convo_private.path_segments(p_conversation_id, p_head_id) s
          JOIN convo.messages m
            ON m.conversation_id = p_conversation_id AND m.id = p_message_id
         WHERE m.branch_id = s.branch_id AND m.depth <= s.max_depth);
END;
$$;

-- is_retry: recognises a retried write by its client-supplied message id,
-- before any other check. False when the id is new; true when the stored
-- message is the same request (role, parts and, if asked, parent): the caller
-- then returns the first result and writes nothing. CV009 when it differs.
CREATE OR REPLACE FUNCTION convo_private.is_retry(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_role            text,
    p_parts           jsonb,
    p_parent_id       uuid,
    p_match_parent    boolean)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_message_id IS NULL THEN
        RETURN false;
    END IF;
    SELECT * INTO v_message FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_message.role IS DISTINCT FROM p_role
       OR (p_match_parent AND v_message.parent_id IS DISTINCT FROM p_parent_id)
       OR v_message.parts IS DISTINCT FROM p_parts THEN
        RAISE EXCEPTION 'message id % is already used for a different message', p_message_id
            USING ERRCODE = 'CV009',
                  DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id),
                  HINT = 'A retry must repeat the first call exactly; a new message needs a new id.';
    END IF;
    RETURN true;
END;
$$;

-- lock_conversation: takes the conversation's row lock (FOR NO KEY UPDATE),
-- which every write to a conversation takes first, so writes to one
-- conversation serialize; returns the current head. CV002 if it does not
-- exist or the caller may not write for its owner (writes_owner: the one
-- owner check of a write).
CREATE OR REPLACE FUNCTION convo_private.lock_conversation(p_conversation_id uuid)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head  uuid;
    v_owner text;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT c.head_message_id, c.owner_id INTO v_head, v_owner
      FROM convo.conversations c
     WHERE c.id = p_conversation_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT convo_private.writes_owner(v_owner) THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_head;
END;
$$;

-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. SECURITY DEFINER: it is
-- the one writer of the head log besides a superuser. The reason and mover
-- come from move_head_to (pgconvo's own moves) or conversations_guard (any
-- other UPDATE: direct_update by session_user); it clears them after use.
CREATE OR REPLACE FUNCTION convo_private.log_head_move()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason   text := nullif(current_setting('convo.head_reason', true), '');
    v_moved_by text := nullif(current_setting('convo.head_moved_by', true), '');
BEGIN
    IF v_reason IS NULL THEN
        v_reason := 'direct_update';
        v_moved_by := session_user;
    END IF;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;

-- message_parts_check: every part is well formed for its type and fits its
-- message's role, and is exactly the element of messages.parts it claims to
-- be (so the two never disagree); derives type, tool_call_id and tool_name
-- from the body (CHECK constraints tie them together).
CREATE OR REPLACE FUNCTION convo_private.message_parts_check()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_msg  convo.messages;
    v_body jsonb := NEW.body;
    v_type text;
    v_where text := format('message %s, part %s', NEW.message_id, NEW.ordinal);
BEGIN
    v_msg := convo_private.message_ref(NEW.conversation_id, NEW.message_id);
    IF v_msg.parts -> NEW.ordinal IS DISTINCT FROM v_body THEN
        RAISE EXCEPTION 'message parts are written with their message, as convo.messages.parts'
            USING ERRCODE = 'CV005', DETAIL = v_where;
    END IF;
    IF octet_length(v_body::text) > convo.max_part_bytes() THEN
        RAISE EXCEPTION 'a message part is larger than % bytes', convo.max_part_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', v_where, octet_length(v_body::text));
    END IF;
    IF jsonb_typeof(v_body) IS DISTINCT FROM 'object' OR jsonb_typeof(v_body -> 'type') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'a message part must be a JSON object with a string "type"'
            USING ERRCODE = 'CV008', DETAIL = v_where;
    END IF;
    v_type := v_body ->> 'type';
    IF v_type = 'text' THEN
        IF jsonb_typeof(v_body -> 'text') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'a text part needs a string "text"' USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSIF v_type = 'tool_use' THEN
        IF jsonb_typeof(v_body -> 'id') IS DISTINCT FROM 'string' OR v_body ->> 'id' = ''
           OR jsonb_typeof(v_body -> 'name') IS DISTINCT FROM 'string' OR v_body ->> 'name' = ''
           OR jsonb_typeof(v_body -> 'input') IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'a tool_use part needs a non-empty string "id" and "name" and an object "input"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        IF v_msg.role <> 'assistant' THEN
            RAISE EXCEPTION 'tool_use belongs in an assistant message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF octet_length((v_body -> 'input')::text) > convo.max_tool_input_bytes() THEN
            RAISE EXCEPTION 'a tool input is larger than % bytes', convo.max_tool_input_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF EXISTS (SELECT 1 FROM convo.message_parts p
                    WHERE p.conversation_id = NEW.conversation_id
                      AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'id') THEN
            RAISE EXCEPTION 'tool call id % is already used in this conversation', v_body ->> 'id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, conversation %s', v_where, v_body ->> 'id', NEW.conversation_id);
        END IF;
    ELSIF v_type = 'tool_result' THEN
        IF jsonb_typeof(v_body -> 'tool_use_id') IS DISTINCT FROM 'string' OR NOT v_body ? 'content'
           OR (v_body ? 'is_error' AND jsonb_typeof(v_body -> 'is_error') <> 'boolean') THEN
            RAISE EXCEPTION 'a tool_result part needs a string "tool_use_id", a "content" and, if given, a boolean "is_error"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        IF v_msg.role NOT IN ('user', 'tool') THEN
            RAISE EXCEPTION 'tool_result belongs in a user or tool message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = v_where;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM convo.message_parts p
                        WHERE p.conversation_id = NEW.conversation_id AND p.message_id = v_msg.parent_id
                          AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'tool_use_id') THEN
            RAISE EXCEPTION 'tool_result names tool call %, which is not a tool_use of the parent message', v_body ->> 'tool_use_id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, parent %s', v_where, v_body ->> 'tool_use_id', v_msg.parent_id);
        END IF;
    ELSIF v_type = 'attachment' THEN
        IF jsonb_typeof(v_body -> 'uri') IS DISTINCT FROM 'string' OR v_body ->> 'uri' = ''
           OR jsonb_typeof(v_body -> 'media_type') IS DISTINCT FROM 'string' OR v_body ->> 'media_type' = '' THEN
            RAISE EXCEPTION 'an attachment part needs a non-empty string "uri" and "media_type"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown message part type "%"', v_type
            USING ERRCODE = 'CV008', DETAIL = v_where,
                  HINT = 'Part types are text, tool_use, tool_result and attachment.';
    END IF;
    NEW.type := v_type;
    NEW.tool_call_id := CASE v_type WHEN 'tool_use' THEN v_body ->> 'id' WHEN 'tool_result' THEN v_body ->> 'tool_use_id' END;
    NEW.tool_name := CASE v_type WHEN 'tool_use' THEN v_body ->> 'name' END;
    RETURN NEW;
END;
$$;

-- message_ref: the message a call names, in the conversation it names.
-- A message of another conversation is CV003, no such message CV002.
CREATE OR REPLACE FUNCTION convo_private.message_ref(p_conversation_id uuid, p_message_id uuid)
RETURNS convo.messages
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_message_id IS NULL THEN
        RAISE EXCEPTION 'a message id is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_message FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id;
    IF FOUND THEN
        RETURN v_message;
    END IF;
    PERFORM convo_private.raise_not_found('message', p_message_id::text, p_conversation_id,
        (SELECT m.conversation_id FROM convo.messages m WHERE m.id = p_message_id LIMIT 1));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- messages_fill_tree: checks a new message's role and parts and computes its
-- place in the tree (depth, sibling_index, branch_id, created_at) from its
-- parent, whoever inserts it, under the conversation's row lock so that
-- concurrent writers serialize.
CREATE OR REPLACE FUNCTION convo_private.messages_fill_tree()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parent convo.messages;
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.role IS NULL OR NEW.role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'unknown role %', coalesce(quote_literal(NEW.role), 'NULL')
            USING ERRCODE = 'CV011', HINT = 'Roles are system, user, assistant and tool.';
    END IF;
    PERFORM convo_private.check_parts(NEW.parts);
    IF NEW.parent_id IS NULL THEN
        NEW.depth := 0;
        SELECT coalesce(max(m.sibling_index), 0) + 1 INTO NEW.sibling_index
          FROM convo.messages m
         WHERE m.conversation_id = NEW.conversation_id AND m.parent_id IS NULL;
        NEW.branch_id := NEW.id;
    ELSE
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        NEW.depth := v_parent.depth + 1;
        SELECT coalesce(max(m.sibling_index), 0) + 1 INTO NEW.sibling_index
          FROM convo.messages m
         WHERE m.conversation_id = NEW.conversation_id AND m.parent_id = NEW.parent_id;
        NEW.branch_id := CASE WHEN NEW.sibling_index = 1 THEN v_parent.branch_id ELSE NEW.id END;
    END IF;
    IF NEW.sibling_index = 1 AND NEW.branch_reason IS NOT NULL THEN
        RAISE EXCEPTION 'a first child has no branch_reason'
            USING ERRCODE = 'CV011',
                  DETAIL = format('message %s, parent %s, branch_reason %s', NEW.id, NEW.parent_id, NEW.branch_reason);
    END IF;
    IF NEW.sibling_index > 1 AND NEW.branch_reason IS NULL THEN
        NEW.branch_reason := 'branch';
    END IF;
    NEW.created_at := clock_timestamp();
    RETURN NEW;
END;
$$;

-- messages_split_parts: writes one message_parts row per element of a new
-- message's parts, in the same statement, so each part is checked on its
-- own and tool calls get their unique index.
CREATE OR REPLACE FUNCTION convo_private.messages_split_parts()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO convo.message_parts (conversation_id, message_id, ordinal, body)
    SELECT NEW.conversation_id, NEW.id, e.ordinality - 1, e.part
      FROM jsonb_array_elements(NEW.parts) WITH ORDINALITY AS e(part, ordinality);
    RETURN NULL;
END;
$$;

-- move_head_to: moves the head and lets log_head_move record why and by whom
-- (through transaction-local settings, cleared again at once so a later
-- direct UPDATE in the same transaction is logged as 'direct_update').
-- Moving the head to where it already is writes nothing.
CREATE OR REPLACE FUNCTION convo_private.move_head_to(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_reason          text,
    p_moved_by        text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('convo.head_reason', p_reason, true);
    PERFORM set_config('convo.head_moved_by', coalesce(p_moved_by, ''), true);
    UPDATE convo.conversations c
       SET head_message_id = p_message_id
     WHERE c.id = p_conversation_id
       AND c.head_message_id IS DISTINCT FROM p_message_id;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
END;
$$;

-- path_from: the path from the root to p_head_id, depth 0 first: one index
-- range scan (branch_id, depth) per segment from path_segments, reading the
-- stored parts of each message, so it costs close to reading a flat list.
-- sibling_count comes from the few siblings after the first (messages_forks_idx).
CREATE OR REPLACE FUNCTION convo_private.path_from(p_conversation_id uuid, p_head_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH forks AS MATERIALIZED (
        SELECT f.parent_id, max(f.sibling_index) AS sibling_count
          FROM convo.messages f
         WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
         GROUP BY f.parent_id
    )
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           coalesce((SELECT f.sibling_count FROM forks f WHERE f.parent_id IS NOT DISTINCT FROM m.parent_id), 1)::int
      FROM convo_private.path_segments(p_conversation_id, p_head_id) s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
END;
$$;

-- path_segments: the branches that the path from the root to p_head_id runs
-- through, each with the deepest message of it on the path. A branch is a run
-- of first children, so there is one row per branch point on the path (one
-- row for a conversation that never branched): the walk up costs the number
-- of branch points, not the number of messages. PL/pgSQL, so its plan is cached.
CREATE OR REPLACE FUNCTION convo_private.path_segments(p_conversation_id uuid, p_head_id uuid)
RETURNS TABLE (branch_id uuid, max_depth int)
LANGUAGE plpgsql
STABLE
ROWS 4
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE segments (branch_id, max_depth) AS (
        SELECT h.branch_id, h.depth
          FROM convo.messages h
         WHERE h.conversation_id = p_conversation_id AND h.id = p_head_id
        UNION ALL
        SELECT fork.branch_id, fork.depth
          FROM segments s
          JOIN convo.messages start ON start.conversation_id = p_conversation_id AND start.id = s.branch_id
          JOIN convo.messages fork ON fork.conversation_id = p_conversation_id AND fork.id = start.parent_id
    )
    SELECT s.branch_id, s.max_depth FROM segments s;
END;
$$;

-- raise_not_found: the error for an id that names nothing in the
-- conversation a call names: CV003 when it names a row of another
-- conversation (p_other_conversation_id) that the caller may see, CV002 when
-- it names none, or only rows of an owner the caller may not see.
CREATE OR REPLACE FUNCTION convo_private.raise_not_found(
    p_what                  text,
    p_id                    text,
    p_conversation_id       uuid,
    p_other_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_other_conversation_id IS NOT NULL
       AND convo_private.sees_owner((SELECT c.owner_id FROM convo.conversations c
                                      WHERE c.id = p_other_conversation_id)) THEN
        RAISE EXCEPTION '% % belongs to another conversation', p_what, p_id
            USING ERRCODE = 'CV003',
                  DETAIL = format('%s %s, conversation %s, named in conversation %s',
                                  p_what, p_id, p_other_conversation_id, p_conversation_id);
    END IF;
    RAISE EXCEPTION '% % does not exist', p_what, p_id
        USING ERRCODE = 'CV002', DETAIL = format('%s %s, conversation %s', p_what, p_id, p_conversation_id);
END;
$$;

-- receipt_arguments_error: why a receipt's arguments cannot be applied, or
-- NULL: 'invalid_arguments' when they fail the tool version's frozen
-- schema, else 'arg_mismatch' when a top-level key of the route's expected
-- values differs. Shared by fill_receipt and tool_receipts_transition, so a
-- direct UPDATE cannot mark bad arguments valid either.
CREATE OR REPLACE FUNCTION convo_private.receipt_arguments_error(
    p_tool_name    text,
    p_tool_version int,
    p_arguments    jsonb,
    p_expected     jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cardinality(convo.args_errors((SELECT t.args_schema FROM convo.tools t
                                       WHERE t.name = p_tool_name AND t.version = p_tool_version),
                                     p_arguments)) > 0 THEN
        RETURN 'invalid_arguments';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_each(p_expected) e WHERE p_arguments -> e.key IS DISTINCT FROM e.value) THEN
        RETURN 'arg_mismatch';
    END IF;
    RETURN NULL;
END;
$$;

-- receipt_ref: the receipt a call names, locked for its transition; CV002
-- if there is none or the caller may not write for its owner.
CREATE OR REPLACE FUNCTION convo_private.receipt_ref(p_receipt_id uuid)
RETURNS convo.tool_receipts
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts;
BEGIN
    IF p_receipt_id IS NULL THEN
        RAISE EXCEPTION 'p_receipt_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_receipt FROM convo.tool_receipts r WHERE r.id = p_receipt_id FOR UPDATE;
    IF NOT FOUND OR NOT convo_private.writes_owner(v_receipt.owner_id) THEN
        RAISE EXCEPTION 'receipt % does not exist', p_receipt_id
            USING ERRCODE = 'CV002', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    RETURN v_receipt;
END;
$$;

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment. An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered).
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
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = NEW.conversation_id
               AND e.tool_name = NEW.tool_name
               AND l.fork_point_id IS NOT DISTINCT FROM v_fork
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

-- refuse_change: the trigger function behind every append-only table (and
-- any other statement a table refuses).
-- A statement-level BEFORE trigger (ENABLE ALWAYS) so it also stops the table
-- owner, TRUNCATE, and sessions with session_replication_role = replica.
CREATE OR REPLACE FUNCTION convo_private.refuse_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The trigger's argument, if any, says why the table refuses (default: append-only).
    RAISE EXCEPTION 'convo.% is %: % is not allowed', TG_TABLE_NAME, coalesce(TG_ARGV[0], 'append-only'), TG_OP
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, operation %s, role %s', TG_TABLE_NAME, TG_OP, current_user),
              HINT = 'Nothing in the conversation tree is updated or deleted: insert a sibling or move the head instead.';
END;
$$;

-- refuse_forgery: the trigger function behind every table whose rows are
-- history (head log, effect events, call links, the ledger, receipts, the
-- allowlist): only pgconvo's own code writes them. It runs as the owner role
-- (SECURITY DEFINER functions owned by convo_owner, which nobody logs in as),
-- so any other current_user is refused, whatever table privileges it holds;
-- a superuser, who could drop the trigger anyway, is let through.
-- Statement-level (ENABLE ALWAYS), so it refuses even when no row matches.
CREATE OR REPLACE FUNCTION convo_private.refuse_forgery()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_user = 'convo_owner'
       OR (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'convo.% is written only by pgconvo''s functions: % by role % is refused',
            TG_TABLE_NAME, TG_OP, current_user
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, operation %s, role %s, session user %s',
                              TG_TABLE_NAME, TG_OP, current_user, session_user),
              HINT = 'History is written through the API (convo.*), which logs who did what.';
END;
$$;

-- tool_effects_log: appends every transition of an effect (its creation
-- from 'requested' included) to tool_effect_events, with the actor and
-- evidence named by set_effect_context, or session_user and none. The
-- settings are honoured only for pgconvo's own transitions (current_user
-- convo_owner): any session can set them, so they never name who did a
-- transition made by anyone else (a superuser's direct UPDATE).
CREATE OR REPLACE FUNCTION convo_private.tool_effects_log()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition (tool_effects_transition let only an identical row through)
    END IF;
    INSERT INTO convo.tool_effect_events (conversation_id, effect_id, from_state, to_state, actor, evidence)
    VALUES (NEW.conversation_id, NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_actor', true), ''), session_user)
                 ELSE session_user END,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_evidence', true), '')::jsonb, '{}')
                 ELSE '{}' END);
    RETURN NULL;
END;
$$;

-- tool_effects_transition: the effect state machine, for every statement.
-- A new effect starts in a state reachable from 'requested'; a change of
-- state must be a row of effect_transitions and may set only the columns
-- that row names; without a change of state nothing changes. CV006 otherwise.
-- Rows are compared by their text, since jsonb's = calls 500 and 500.000 equal.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_from    text := CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END;
    v_changes text[];
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text THEN
            RAISE EXCEPTION 'effect % changes only by a transition of its state', OLD.id
                USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s', OLD.id, OLD.state);
        END IF;
        RETURN NEW;
    END IF;
    SELECT t.changes INTO v_changes FROM convo.effect_transitions t
     WHERE t.from_state = v_from AND t.to_state = NEW.state;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'an effect cannot go from % to %', v_from, NEW.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, %s to %s', NEW.id, v_from, NEW.state),
                  HINT = 'The transitions are listed in convo.effect_transitions.';
    END IF;
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - v_changes - 'state')::text <> (to_jsonb(OLD) - v_changes - 'state')::text THEN
        RAISE EXCEPTION 'the transition % to % may change only %', OLD.state, NEW.state, array_to_string(v_changes, ', ')
            USING ERRCODE = 'CV006', DETAIL = format('effect %s', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

-- tool_receipts_transition: a receipt is filed pending and ends once, applied
-- or failed; its owner, key, tool and request never change, its arguments
-- are filled once and are valid only if they pass receipt_arguments_error,
-- and a settled receipt never changes (compared as text: jsonb's = calls 500
-- and 500.000 equal). CV006.
CREATE OR REPLACE FUNCTION convo_private.tool_receipts_transition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

-- tool_ref: the latest registered version of a tool, or CV007: a tool that
-- is not on the allowlist never gets a go-ahead.
CREATE OR REPLACE FUNCTION convo_private.tool_ref(p_name text)
RETURNS convo.tools
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tool convo.tools;
BEGIN
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = p_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tool % is not registered', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'CV007', DETAIL = format('tool %s', p_name),
                  HINT = 'A DBA registers tools with convo.register_tool.';
    END IF;
    RETURN v_tool;
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
RETURN convo_private.add_sibling(p_conversation_id, p_message_id, p_parts, p_expected_head,
                         p_new_message_id, p_moved_by, 'assistant', 'regenerate');

COMMENT ON FUNCTION convo.regenerate(uuid, uuid, jsonb, uuid, uuid, text) IS
    'Regenerate an assistant message: insert its sibling (branch_reason regenerate) and move the head to it.';

-- documented_grants: every privilege pgconvo grants, as data (the README's
-- "Security" section in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's for convo_admin (a
-- member of both); SELECT on the views for convo_app, on every table and
-- view for convo_reader. Nothing for PUBLIC, nothing at all on
-- convo_private. A function added later is nobody's until it is listed here.
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
                                       'max_ref_length']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace;
END;

-- fork_point_of: the fork point of a tool call's message: the parent of the
-- nearest person's turn at or above it (a user message with a part other
-- than tool_result: messages that only carry tool results belong to the
-- agent loop). NULL stands for the conversation itself: that turn has no
-- parent, or there is no such turn.
CREATE OR REPLACE FUNCTION convo_private.fork_point_of(p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE up AS (
        SELECT m.id, m.parent_id, m.role, m.depth
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id
        UNION ALL
        SELECT p.id, p.parent_id, p.role, p.depth
          FROM up
          JOIN convo.messages p ON p.conversation_id = p_conversation_id AND p.id = up.parent_id
    )
    SELECT up.parent_id
      FROM up
     WHERE up.role = 'user'
       AND EXISTS (SELECT 1 FROM convo.message_parts pp
                    WHERE pp.conversation_id = p_conversation_id AND pp.message_id = up.id
                      AND pp.type <> 'tool_result')
     ORDER BY up.depth DESC
     LIMIT 1;
END;

-- granted_privileges: every privilege the catalog holds on pgconvo's
-- schemas, relations and functions for a role other than the object's owner
-- (PUBLIC included, and the implicit defaults: a function without an ACL is
-- executable by PUBLIC). Compared with documented_grants by self_check.
CREATE OR REPLACE FUNCTION convo_private.granted_privileges()
RETURNS TABLE (object_kind text, object_name text, grantee text, privilege text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'SCHEMA', n.nspname::text, coalesce(r.rolname::text, 'PUBLIC'), a.privilege_type
      FROM pg_namespace n
     CROSS JOIN LATERAL aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
      LEFT JOIN pg_roles r ON r.oid = a.grantee
     WHERE n.nspname IN ('convo', 'convo_private') AND a.grantee <> n.nspowner
    UNION ALL
    SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass::text,
           coalesce(r.rolname::text, 'PUBLIC'), a.privilege_type
      FROM pg_class c
     CROSS JOIN LATERAL aclexplode(coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                                c.relowner))) a
      LEFT JOIN pg_roles r ON r.oid = a.grantee
     WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
       AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND a.grantee <> c.relowner
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, coalesce(r.rolname::text, 'PUBLIC'), a.privilege_type
      FROM pg_proc p
     CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
      LEFT JOIN pg_roles r ON r.oid = a.grantee
     WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND a.grantee <> p.proowner;
END;

-- json_path: the JSON path of an object member, as validation errors name
-- it: $.amount_minor, $["odd key"] (elements are written $.items[2]).
CREATE OR REPLACE FUNCTION convo_private.json_path(p_parent text, p_key text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN p_parent || CASE WHEN p_key ~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN '.' || p_key
                        ELSE '[' || to_jsonb(p_key)::text || ']' END;

-- package_triggers: every trigger pgconvo puts on its tables, by what it
-- guards: append_only (refuse_change, refuse_forgery), head_log (the head
-- log's writer and the guard that names direct updates) and rule (the tree,
-- the state machines, the ledger). self_check requires each present and
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
        ('effect_transitions', 'effect_transitions_fixed', 'append_only'),
        ('generations', 'generations_no_delete', 'append_only'),
        ('message_parts', 'message_parts_append_only', 'append_only'),
        ('messages', 'messages_append_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_append_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_no_delete', 'append_only'),
        ('tool_effects', 'tool_effects_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_delete', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_forgery', 'append_only'),
        ('tools', 'tools_append_only', 'append_only'),
        ('tools', 'tools_no_forgery', 'append_only'),
        ('conversations', 'conversations_guard', 'head_log'),
        ('conversations', 'conversations_head_log', 'head_log'),
        ('generations', 'generations_transition', 'rule'),
        ('message_parts', 'message_parts_check', 'rule'),
        ('message_parts', 'message_parts_record_tool_call', 'rule'),
        ('messages', 'messages_fill_tree', 'rule'),
        ('messages', 'messages_split_parts', 'rule'),
        ('tool_effects', 'tool_effects_log', 'rule'),
        ('tool_effects', 'tool_effects_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_transition', 'rule')) AS t (table_name, trigger_name, guards);
END;

-- sees_owner: whether the caller may read an owner's rows. A convo_app
-- session sees only the owner named by SET LOCAL convo.owner_id: unset
-- (NULL in a session that never set it, '' after a SET LOCAL ended) it sees
-- no one. A login member of convo_reader (or convo_admin, or a superuser)
-- sees every owner. The API functions run as the owner role, so they ask
-- once per call, about session_user: the login role that connected. No SET
-- clause: the body is bound when it is created, and the planner inlines it.
CREATE OR REPLACE FUNCTION convo_private.sees_owner(p_owner_id text)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN coalesce(p_owner_id = current_setting('convo.owner_id', true), false)
    OR pg_has_role(session_user, 'convo_reader', 'USAGE');

-- set_effect_context: names the actor and evidence that tool_effects_log
-- writes with the next transition; called with NULLs right after, so a later
-- UPDATE in the same transaction is logged with session_user and no evidence.
CREATE OR REPLACE FUNCTION convo_private.set_effect_context(p_actor text, p_evidence jsonb)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT set_config('convo.effect_actor', coalesce(p_actor, ''), true),
           set_config('convo.effect_evidence', coalesce(p_evidence::text, ''), true);
END;

-- writes_owner: whether the caller may change an owner's rows: the owner
-- named by SET LOCAL convo.owner_id, or every owner for a login member of
-- convo_admin (or a superuser). convo_reader reads across owners but writes
-- nothing.
CREATE OR REPLACE FUNCTION convo_private.writes_owner(p_owner_id text)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN coalesce(p_owner_id = current_setting('convo.owner_id', true), false)
    OR pg_has_role(session_user, 'convo_admin', 'USAGE');

-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
-- The view runs as its owner, so it filters by owner itself (the caller's
-- convo.owner_id, or every owner for convo_reader), and walks the path in
-- plain SQL (as path_segments does): a caller may use only pg_catalog's
-- functions through it, not the private schema's.
CREATE OR REPLACE VIEW convo.orphaned_applied_effects AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.external_ref,
       e.amount_minor,
       e.currency,
       e.settled_at,
       ARRAY(SELECT l.tool_call_id FROM convo.tool_effect_calls l
              WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
              ORDER BY l.decided_at) AS tool_call_ids
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state = 'applied'
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(session_user, 'convo_reader', 'USAGE')))
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

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head (the caller''s owner, or all for convo_reader).';

-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream. Filtered
-- by owner like orphaned_applied_effects.
CREATE OR REPLACE VIEW convo.stale_generations AS
SELECT g.conversation_id,
       g.id AS generation_id,
       g.model,
       g.prompt_message_id,
       g.started_at
  FROM convo.generations g
  JOIN convo.conversations c ON c.id = g.conversation_id
 WHERE g.state = 'streaming'
   AND g.started_at < clock_timestamp() - convo.generation_stale_after()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(session_user, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';

-- stale_pending_effects: effects still pending or awaiting confirmation past
-- their deadline, with the key a sweeper re-sends (or looks up) under. A
-- pending effect is "unknown", never "not done": it is not failed
-- automatically, only settled on evidence. Filtered by owner like
-- orphaned_applied_effects: the caller's, or every owner for convo_reader.
CREATE OR REPLACE VIEW convo.stale_pending_effects AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.state,
       e.idempotency_key,
       e.requested_at,
       e.deadline_at
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state IN ('pending', 'awaiting_confirmation')
   AND e.deadline_at < clock_timestamp()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(session_user, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_pending_effects IS
    'Effects pending or awaiting confirmation past their deadline, with the key to re-send or look up under.';

-- conversation_head_log_append_only: convo.conversation_head_log is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER conversation_head_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.conversation_head_log
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_append_only;

-- conversation_head_log_no_forgery: rows of convo.conversation_head_log are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER conversation_head_log_no_forgery
    BEFORE INSERT ON convo.conversation_head_log
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_no_forgery;

-- conversations_guard: id, owner and creation time never change, and a head
-- once set is never unset.
CREATE OR REPLACE TRIGGER conversations_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW EXECUTE FUNCTION convo_private.conversations_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_guard;

-- conversations_head_log: every change of a head, by any statement (the API
-- or a direct UPDATE by the owner), writes exactly one head-log row in the
-- same transaction. An UPDATE that leaves the head where it is writes none.
CREATE OR REPLACE TRIGGER conversations_head_log
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id)
    EXECUTE FUNCTION convo_private.log_head_move();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_head_log;

-- conversations_no_delete: a conversation is never deleted (erasure redacts
-- content and keeps the shape), so DELETE and TRUNCATE raise CV005.
CREATE OR REPLACE TRIGGER conversations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.conversations
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_no_delete;

-- effect_transitions_fixed: the effect state machine is fixed by the migrations (CV005).
CREATE OR REPLACE TRIGGER effect_transitions_fixed
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON convo.effect_transitions
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change('the fixed effect state machine');
ALTER TABLE convo.effect_transitions ENABLE ALWAYS TRIGGER effect_transitions_fixed;

-- generations_no_delete: generations are records of work done; never deleted (CV005).
CREATE OR REPLACE TRIGGER generations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.generations
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_no_delete;

-- generations_transition: a generation starts streaming and ends once (CV006).
CREATE OR REPLACE TRIGGER generations_transition
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH ROW EXECUTE FUNCTION convo_private.generations_transition();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_transition;

-- message_parts_append_only: convo.message_parts is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER message_parts_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_append_only;

-- message_parts_check: each part is checked (shape, role, tool pairing,
-- size) on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER message_parts_check
    BEFORE INSERT ON convo.message_parts
    FOR EACH ROW EXECUTE FUNCTION convo_private.message_parts_check();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_check;

-- message_parts_record_tool_call: a tool call's ledger decision is written
-- in the statement that stores its tool_use part, before any request leaves.
CREATE OR REPLACE TRIGGER message_parts_record_tool_call
    AFTER INSERT ON convo.message_parts
    FOR EACH ROW
    WHEN (NEW.type = 'tool_use')
    EXECUTE FUNCTION convo_private.record_tool_call();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_record_tool_call;

-- messages_append_only: convo.messages is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER messages_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_append_only;

-- messages_fill_tree: a message's depth, sibling_index and branch_id are
-- computed from its parent on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER messages_fill_tree
    BEFORE INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.messages_fill_tree();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_fill_tree;

-- messages_split_parts: a message's parts become message_parts rows in the
-- statement that inserts the message.
CREATE OR REPLACE TRIGGER messages_split_parts
    AFTER INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.messages_split_parts();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_split_parts;

-- tool_effect_calls_append_only: a tool call's ledger decision is written once (CV005).
CREATE OR REPLACE TRIGGER tool_effect_calls_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_calls
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_append_only;

-- tool_effect_calls_no_forgery: rows of convo.tool_effect_calls are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effect_calls_no_forgery
    BEFORE INSERT ON convo.tool_effect_calls
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_no_forgery;

-- tool_effect_events_append_only: the effect event log is append-only (CV005).
CREATE OR REPLACE TRIGGER tool_effect_events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_append_only;

-- tool_effect_events_no_forgery: rows of convo.tool_effect_events are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effect_events_no_forgery
    BEFORE INSERT ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_no_forgery;

-- tool_effects_log: every transition of an effect is appended to tool_effect_events.
CREATE OR REPLACE TRIGGER tool_effects_log
    AFTER INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_effects_log();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_log;

-- tool_effects_no_delete: an effect is never deleted (CV005); abandoning a branch is not a transition.
CREATE OR REPLACE TRIGGER tool_effects_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_effects
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_no_delete;

-- tool_effects_no_forgery: rows of convo.tool_effects are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effects_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_no_forgery;

-- tool_effects_transition: every change of an effect is a transition of its state machine (CV006).
CREATE OR REPLACE TRIGGER tool_effects_transition
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_effects_transition();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_transition;

-- tool_receipts_no_delete: a receipt is never deleted (CV005).
CREATE OR REPLACE TRIGGER tool_receipts_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_no_delete;

-- tool_receipts_no_forgery: rows of convo.tool_receipts are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_receipts_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_no_forgery;

-- tool_receipts_transition: a receipt goes from pending to applied or failed, once (CV006).
CREATE OR REPLACE TRIGGER tool_receipts_transition
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_receipts_transition();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_transition;

-- tools_append_only: a registered tool version is frozen (CV005); other settings make the next version.
CREATE OR REPLACE TRIGGER tools_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tools
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_append_only;

-- tools_no_forgery: the allowlist is written only through register_tool
-- (refuse_forgery), which checks each schema; any other role, whatever its
-- privileges, gets CV005.
CREATE OR REPLACE TRIGGER tools_no_forgery
    BEFORE INSERT ON convo.tools
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_no_forgery;

-- The helpers that moved to convo_private, gone from convo: the triggers
-- and SQL-bodied functions above no longer use them.
DROP FUNCTION convo.add_sibling;
DROP FUNCTION convo.check_args_schema;
DROP FUNCTION convo.check_expected_head;
DROP FUNCTION convo.check_parts;
DROP FUNCTION convo.check_size;
DROP FUNCTION convo.conversation_ref;
DROP FUNCTION convo.conversations_guard;
DROP FUNCTION convo.effect_ref;
DROP FUNCTION convo.fork_point_of;
DROP FUNCTION convo.generation_ref;
DROP FUNCTION convo.generations_transition;
DROP FUNCTION convo.is_on_path;
DROP FUNCTION convo.is_retry;
DROP FUNCTION convo.json_path;
DROP FUNCTION convo.lock_conversation;
DROP FUNCTION convo.log_head_move;
DROP FUNCTION convo.message_parts_check;
DROP FUNCTION convo.message_ref;
DROP FUNCTION convo.messages_fill_tree;
DROP FUNCTION convo.messages_split_parts;
DROP FUNCTION convo.move_head_to;
DROP FUNCTION convo.path_from;
DROP FUNCTION convo.path_segments;
DROP FUNCTION convo.raise_not_found;
DROP FUNCTION convo.receipt_arguments_error;
DROP FUNCTION convo.receipt_ref;
DROP FUNCTION convo.record_tool_call;
DROP FUNCTION convo.refuse_change;
DROP FUNCTION convo.set_effect_context;
DROP FUNCTION convo.tool_effects_log;
DROP FUNCTION convo.tool_effects_transition;
DROP FUNCTION convo.tool_receipts_transition;
DROP FUNCTION convo.tool_ref;

-- Exactly the documented privileges (nothing for PUBLIC).
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
