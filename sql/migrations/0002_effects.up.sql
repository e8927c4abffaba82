-- 0002_effects: generations, the tool registry (the allowlist), the effects
-- ledger with its constraint-backed state machine, and receipts.
--
-- What the model did (generations) is recorded apart from what was said
-- (messages), and what a tool did to the world (effects, receipts) apart
-- from both: the tree can branch, an effect cannot be taken back.

-- A generation is the model's work on a prompt. It ends exactly once:
-- completed (with its assistant message), failed (with an error code) or
-- cancelled; generations_transition refuses anything else (CV006).
CREATE TABLE convo.generations (
    conversation_id   uuid        NOT NULL REFERENCES convo.conversations (id),
    id                uuid        NOT NULL,
    prompt_message_id uuid        NOT NULL,
    head_at_begin     uuid,
    model             text        NOT NULL CHECK (model <> ''),
    params            jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(params) = 'object'),
    request_digest    text,
    state             text        NOT NULL DEFAULT 'streaming'
                                  CHECK (state IN ('streaming', 'completed', 'failed', 'cancelled')),
    message_id        uuid,
    usage             jsonb,
    finish_reason     text,
    error_code        text,
    error             jsonb,
    started_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at       timestamptz,
    PRIMARY KEY (conversation_id, id),
    FOREIGN KEY (conversation_id, prompt_message_id) REFERENCES convo.messages (conversation_id, id),
    FOREIGN KEY (conversation_id, head_at_begin) REFERENCES convo.messages (conversation_id, id),
    FOREIGN KEY (conversation_id, message_id) REFERENCES convo.messages (conversation_id, id),
    CHECK ((state = 'streaming') = (finished_at IS NULL)),
    CHECK ((state = 'completed') = (message_id IS NOT NULL)),
    CHECK ((state = 'completed') = (usage IS NOT NULL)),
    CHECK ((state = 'failed') = (error_code IS NOT NULL)),
    CHECK ((state = 'failed') = (error IS NOT NULL))
);
CREATE INDEX generations_streaming_idx ON convo.generations (started_at) WHERE state = 'streaming';

-- The allowlist. A registered version never changes (tools_append_only); other
-- settings make the next version, and every effect and receipt records the
-- version it was checked against.
CREATE TABLE convo.tools (
    name              text        NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$'),
    version           int         NOT NULL CHECK (version >= 1),
    effectful         boolean     NOT NULL,
    args_schema       jsonb       NOT NULL CHECK (jsonb_typeof(args_schema) = 'object'),
    idempotency_scope text        NOT NULL CHECK (idempotency_scope IN ('tool_call', 'conversation_args', 'fork_args')),
    deadline          interval    NOT NULL CHECK (deadline > interval '0'),
    amount_arg        text,
    currency_arg      text,
    registered_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    registered_by     text        NOT NULL DEFAULT session_user,
    PRIMARY KEY (name, version)
);

-- The effect states and the transitions between them: the state machine is
-- data. tool_effect_events references it by foreign key, and
-- tool_effects_transition refuses any other change of state (CV006).
-- 'requested' is the pseudo-state a new effect comes from.
-- changes lists the columns a transition may set; every other column of
-- the effect keeps its value.
CREATE TABLE convo.effect_transitions (
    from_state text   NOT NULL,
    to_state   text   NOT NULL,
    changes    text[] NOT NULL,
    PRIMARY KEY (from_state, to_state)
);
INSERT INTO convo.effect_transitions (from_state, to_state, changes) VALUES
    ('requested', 'pending', '{}'),
    ('requested', 'awaiting_confirmation', '{}'),
    ('requested', 'failed', '{}'),
    ('awaiting_confirmation', 'pending', '{idempotency_key,deadline_at,confirmed_by,confirmed_at}'),
    ('awaiting_confirmation', 'failed', '{error_code,http_status,settled_at}'),
    ('pending', 'applied', '{external_ref,http_status,settled_at}'),
    ('pending', 'failed', '{error_code,http_status,settled_at}'),
    ('applied', 'compensated', '{compensated_by,compensated_at}');

-- The effects ledger: one row per change a tool makes (or may have made) in
-- the world, written in the transaction that stores the tool_use part,
-- before the request leaves. The CHECKs tie each state to its columns in
-- both directions; tool_effects_transition keeps settled rows settled.
CREATE TABLE convo.tool_effects (
    conversation_id   uuid        NOT NULL REFERENCES convo.conversations (id),
    id                uuid        NOT NULL,
    tool_name         text        NOT NULL,
    tool_version      int         NOT NULL,
    idempotency_key   text        NOT NULL CHECK (length(idempotency_key) BETWEEN 8 AND 255),
    scope_key         text        NOT NULL,
    state             text        NOT NULL CHECK (state IN ('awaiting_confirmation', 'pending', 'applied', 'failed', 'compensated')),
    arguments         jsonb       NOT NULL,
    amount_minor      bigint,
    currency          char(3),
    repeats_effect_id uuid,
    requested_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    deadline_at       timestamptz NOT NULL,
    confirmed_by      text,
    confirmed_at      timestamptz,
    settled_at        timestamptz,
    external_ref      text,
    http_status       int         CHECK (http_status BETWEEN 100 AND 599),
    error_code        text,
    compensated_by    text,
    compensated_at    timestamptz,
    PRIMARY KEY (conversation_id, id),
    UNIQUE (conversation_id, idempotency_key),
    UNIQUE (conversation_id, scope_key),
    FOREIGN KEY (tool_name, tool_version) REFERENCES convo.tools (name, version),
    FOREIGN KEY (conversation_id, repeats_effect_id) REFERENCES convo.tool_effects (conversation_id, id),
    CHECK (repeats_effect_id IS DISTINCT FROM id),
    CHECK (currency ~ '^[A-Z]{3}$'),
    -- settled exactly when applied, failed or compensated
    CHECK ((state IN ('applied', 'failed', 'compensated')) = (settled_at IS NOT NULL)),
    -- applied (and later compensated) exactly when there is an external reference
    CHECK ((state IN ('applied', 'compensated')) = (external_ref IS NOT NULL)),
    -- failed exactly when an error code is set
    CHECK ((state = 'failed') = (error_code IS NOT NULL)),
    -- compensated exactly when compensated_by (and its time) is set
    CHECK ((state = 'compensated') = (compensated_by IS NOT NULL)),
    CHECK ((compensated_by IS NULL) = (compensated_at IS NULL)),
    -- a confirmation names who gave it and when; an effect awaiting one has none
    CHECK ((confirmed_by IS NULL) = (confirmed_at IS NULL)),
    CHECK (state <> 'awaiting_confirmation' OR confirmed_by IS NULL),
    -- a re-run held for confirmation repeats an earlier effect; once confirmed it
    -- runs under a key of its own, not its scope key
    CHECK (state <> 'awaiting_confirmation' OR (repeats_effect_id IS NOT NULL AND idempotency_key = scope_key)),
    CHECK (confirmed_by IS NULL OR (repeats_effect_id IS NOT NULL AND idempotency_key <> scope_key)),
    CHECK (http_status IS NULL OR state IN ('applied', 'failed', 'compensated'))
);
CREATE INDEX tool_effects_open_idx ON convo.tool_effects (deadline_at)
    WHERE state IN ('pending', 'awaiting_confirmation');
CREATE INDEX tool_effects_applied_idx ON convo.tool_effects (conversation_id) WHERE state = 'applied';

-- Which tool call caused or reuses which effect, and the ledger's decision
-- for it, taken when the call was appended. One effect can belong to several
-- calls (reuse); a call of a registered tool without effects is 'replay' and
-- has none. The foreign key to the tool_use part makes every effect
-- findable on its branch.
CREATE TABLE convo.tool_effect_calls (
    conversation_id uuid        NOT NULL,
    tool_call_id    text        NOT NULL,
    message_id      uuid        NOT NULL,
    ordinal         int         NOT NULL,
    effect_id       uuid,
    decision        text        NOT NULL CHECK (decision IN ('execute', 'reuse', 'confirm', 'rejected', 'replay')),
    fork_point_id   uuid,
    decided_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, tool_call_id),
    FOREIGN KEY (conversation_id, message_id, ordinal) REFERENCES convo.message_parts (conversation_id, message_id, ordinal),
    FOREIGN KEY (conversation_id, effect_id) REFERENCES convo.tool_effects (conversation_id, id),
    FOREIGN KEY (conversation_id, fork_point_id) REFERENCES convo.messages (conversation_id, id),
    CHECK ((decision = 'replay') = (effect_id IS NULL))
);
CREATE INDEX tool_effect_calls_effect_idx ON convo.tool_effect_calls (conversation_id, effect_id);

-- Every transition of every effect, with its evidence and actor, appended by
-- tool_effects_log (including the first, from 'requested').
CREATE TABLE convo.tool_effect_events (
    conversation_id uuid        NOT NULL,
    effect_id       uuid        NOT NULL,
    seq             bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    from_state      text        NOT NULL,
    to_state        text        NOT NULL,
    actor           text,
    evidence        jsonb       NOT NULL DEFAULT '{}',
    at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, effect_id, seq),
    FOREIGN KEY (conversation_id, effect_id) REFERENCES convo.tool_effects (conversation_id, id),
    FOREIGN KEY (from_state, to_state) REFERENCES convo.effect_transitions (from_state, to_state)
);

-- Receipts: a route-initiated mutation gets its row first (pending), its
-- arguments checked against the tool version frozen at begin_receipt, then
-- exactly one outcome: applied or failed, with an HTTP-style status.
CREATE TABLE convo.tool_receipts (
    id              uuid        NOT NULL PRIMARY KEY,
    owner_id        text        NOT NULL CHECK (owner_id <> ''),
    idempotency_key text        NOT NULL CHECK (length(idempotency_key) BETWEEN 8 AND 255),
    tool_name       text        NOT NULL,
    tool_version    int         NOT NULL,
    request         jsonb       NOT NULL,
    request_digest  text        NOT NULL,
    arguments       jsonb,
    expected        jsonb,
    arguments_valid boolean,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'failed')),
    http_status     int         CHECK (http_status BETWEEN 100 AND 599),
    error_code      text,
    result_ref      text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    deadline_at     timestamptz NOT NULL,
    filled_at       timestamptz,
    settled_at      timestamptz,
    UNIQUE (owner_id, idempotency_key),
    FOREIGN KEY (tool_name, tool_version) REFERENCES convo.tools (name, version),
    CHECK ((status = 'pending') = (settled_at IS NULL)),
    CHECK ((status = 'pending') = (http_status IS NULL)),
    CHECK ((status = 'applied') = (result_ref IS NOT NULL)),
    CHECK ((status = 'failed') = (error_code IS NOT NULL)),
    CHECK (status <> 'applied' OR arguments_valid IS TRUE),
    CHECK ((arguments IS NULL) = (filled_at IS NULL)),
    CHECK ((arguments IS NULL) = (arguments_valid IS NULL))
);
CREATE INDEX tool_receipts_pending_idx ON convo.tool_receipts (deadline_at) WHERE status = 'pending';

-- Lets effect_for_call tell "another conversation's tool call" (CV003) from
-- "no such call" (CV002).
CREATE INDEX message_parts_tool_call_idx ON convo.message_parts (tool_call_id) WHERE type = 'tool_use';

-- Functions (current text in sql/functions/, one per file).

-- apply_receipt: pending, with validated arguments, to applied. Call it in
-- the same transaction as the mutation itself to make the two atomic: both
-- commit, or neither does. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.apply_receipt(p_receipt_id uuid, p_result_ref text, p_http_status int DEFAULT 201)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo.receipt_ref(p_receipt_id);
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
SET search_path = pg_catalog, convo
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
                v_errors := v_errors || format('%s: required', convo.json_path(p_path, v_key));
            END IF;
        END LOOP;
        FOR v_key, v_sub IN SELECT * FROM jsonb_each(p_value) LOOP
            IF p_schema -> 'properties' ? v_key THEN
                v_errors := v_errors || convo.args_errors(p_schema -> 'properties' -> v_key, v_sub, convo.json_path(p_path, v_key));
            ELSIF p_schema -> 'additionalProperties' = 'false' THEN
                v_errors := v_errors || format('%s: additionalProperties: not allowed', convo.json_path(p_path, v_key));
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_head     uuid := convo.lock_conversation(p_conversation_id);
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
    PERFORM convo.message_ref(p_conversation_id, p_prompt_message_id);
    PERFORM convo.check_size('p_params', p_params, convo.max_detail_bytes());
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
-- key with another tool or request raises CV009.
CREATE OR REPLACE FUNCTION convo.begin_receipt(
    p_owner_id        text,
    p_idempotency_key text,
    p_tool_name       text,
    p_request         jsonb DEFAULT '{}')
RETURNS TABLE (receipt_id uuid, status text, http_status int, error_code text, result_ref text, created boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_tool    convo.tools;
    v_digest  text;
    v_receipt convo.tool_receipts;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' OR p_request IS NULL OR p_tool_name IS NULL THEN
        RAISE EXCEPTION 'p_owner_id, p_tool_name and p_request are required' USING ERRCODE = 'CV011';
    END IF;
    IF p_idempotency_key IS NULL OR length(p_idempotency_key) NOT BETWEEN 8 AND 255 THEN
        RAISE EXCEPTION 'an idempotency key is 8 to 255 characters'
            USING ERRCODE = 'CV011', DETAIL = format('key %s', coalesce(quote_literal(p_idempotency_key), 'NULL'));
    END IF;
    PERFORM convo.check_size('p_request', p_request, convo.max_request_bytes());
    v_digest := encode(sha256(convert_to(p_request::text, 'UTF8')), 'hex');

    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    IF NOT FOUND THEN
        v_tool := convo.tool_ref(p_tool_name);
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_generation convo.generations;
BEGIN
    PERFORM convo.lock_conversation(p_conversation_id);
    v_generation := convo.generation_ref(p_conversation_id, p_generation_id);
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

-- check_args_schema: refuses (CV011) an argument schema that uses anything
-- outside the supported JSON Schema subset, so that nothing a schema says is
-- silently left unchecked. Annotations are accepted and ignored.
CREATE OR REPLACE FUNCTION convo.check_args_schema(p_schema jsonb, p_path text DEFAULT '$')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
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
                PERFORM convo.check_args_schema(e.value, convo.json_path(p_path || '.properties', e.key))
                   FROM jsonb_each(v_value) e;
            END IF;
        WHEN 'items' THEN
            PERFORM convo.check_args_schema(v_value, p_path || '.items');
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

-- check_size: raises CV010 when a JSON value is larger than its cap (in
-- bytes of jsonb's text form), naming what it was; NULL passes.
CREATE OR REPLACE FUNCTION convo.check_size(p_what text, p_value jsonb, p_cap int)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF p_value IS NOT NULL AND octet_length(p_value::text) > p_cap THEN
        RAISE EXCEPTION '% is larger than % bytes', p_what, p_cap
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', p_what, octet_length(p_value::text));
    END IF;
END;
$$;

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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_effect convo.tool_effects;
BEGIN
    PERFORM convo.lock_conversation(p_conversation_id);
    v_effect := convo.effect_ref(p_conversation_id, p_effect_id);
    IF p_compensated_by IS NULL OR p_compensated_by = '' OR p_evidence IS NULL THEN
        RAISE EXCEPTION 'p_compensated_by (the id of the answering movement) and p_evidence are required'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF length(p_compensated_by) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_compensated_by is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('effect %s', p_effect_id);
    END IF;
    PERFORM convo.check_size('evidence', p_evidence, convo.max_detail_bytes());
    IF v_effect.state = 'compensated' AND v_effect.compensated_by = p_compensated_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'applied' THEN
        RAISE EXCEPTION 'effect % is %: only an applied effect is compensated', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, compensated_by %s', p_effect_id, v_effect.state, v_effect.compensated_by);
    END IF;
    PERFORM convo.set_effect_context(session_user, p_evidence);
    UPDATE convo.tool_effects e
       SET state = 'compensated', compensated_by = p_compensated_by, compensated_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo.set_effect_context(NULL, NULL);
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_head       uuid := convo.lock_conversation(p_conversation_id);
    v_generation convo.generations := convo.generation_ref(p_conversation_id, p_generation_id);
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
    PERFORM convo.check_size('p_usage', p_usage, convo.max_detail_bytes());
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
        PERFORM convo.move_head_to(p_conversation_id, v_message,
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_effect convo.tool_effects;
BEGIN
    PERFORM convo.lock_conversation(p_conversation_id);
    v_effect := convo.effect_ref(p_conversation_id, p_effect_id);
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
    PERFORM convo.set_effect_context(p_confirmed_by, '{}');
    UPDATE convo.tool_effects e
       SET state = 'pending',
           idempotency_key = 'rerun:' || e.id || ':of:' || e.repeats_effect_id,
           confirmed_by = p_confirmed_by,
           confirmed_at = clock_timestamp(),
           deadline_at = clock_timestamp() + (SELECT t.deadline FROM convo.tools t
                                               WHERE t.name = e.tool_name AND t.version = e.tool_version)
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo.set_effect_context(NULL, NULL);
END;
$$;

COMMENT ON FUNCTION convo.confirm_effect(uuid, uuid, text) IS
    'Confirm a held re-run: awaiting_confirmation to pending under a key of its own naming the effect it repeats.';

-- decline_effect: a person declines a held re-run: awaiting_confirmation to
-- failed with error code 'declined'; who declined is in the event log. An
-- exact repeat (same person) is a no-op.
CREATE OR REPLACE FUNCTION convo.decline_effect(p_conversation_id uuid, p_effect_id uuid, p_declined_by text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_effect convo.tool_effects;
BEGIN
    PERFORM convo.lock_conversation(p_conversation_id);
    v_effect := convo.effect_ref(p_conversation_id, p_effect_id);
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
    PERFORM convo.set_effect_context(p_declined_by, '{}');
    UPDATE convo.tool_effects e
       SET state = 'failed', error_code = 'declined', settled_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo.set_effect_context(NULL, NULL);
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_tool_name text;
BEGIN
    PERFORM convo.conversation_ref(p_conversation_id);
    IF p_tool_call_id IS NULL THEN
        RAISE EXCEPTION 'p_tool_call_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT p.tool_name INTO v_tool_name FROM convo.message_parts p
     WHERE p.conversation_id = p_conversation_id AND p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id;
    IF NOT FOUND THEN
        PERFORM convo.raise_not_found('tool call', p_tool_call_id, p_conversation_id,
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

-- effect_ref: the effect a call names, locked for its transition. CV003 if
-- it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo.effect_ref(p_conversation_id uuid, p_effect_id uuid)
RETURNS convo.tool_effects
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
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
    PERFORM convo.raise_not_found('effect', p_effect_id::text, p_conversation_id,
        (SELECT e.conversation_id FROM convo.tool_effects e WHERE e.id = p_effect_id LIMIT 1));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- expire_receipts: the sweeper: pending receipts past their tool's deadline
-- fail with 504 deadline_exceeded, so none stays pending forever. Returns
-- how many it failed.
CREATE OR REPLACE FUNCTION convo.expire_receipts(p_now timestamptz DEFAULT clock_timestamp())
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_generation convo.generations;
BEGIN
    PERFORM convo.lock_conversation(p_conversation_id);
    v_generation := convo.generation_ref(p_conversation_id, p_generation_id);
    IF p_error_code IS NULL OR p_error_code = '' OR p_error IS NULL THEN
        RAISE EXCEPTION 'p_error_code and p_error are required' USING ERRCODE = 'CV011',
            DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length() USING ERRCODE = 'CV010';
    END IF;
    PERFORM convo.check_size('p_error', p_error, convo.max_detail_bytes());
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo.receipt_ref(p_receipt_id);
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo.receipt_ref(p_receipt_id);
    v_code    text;
BEGIN
    IF p_arguments IS NULL OR p_expected IS NULL OR jsonb_typeof(p_expected) <> 'object' THEN
        RAISE EXCEPTION 'p_arguments and p_expected (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    PERFORM convo.check_size('p_arguments', p_arguments, convo.max_request_bytes());
    PERFORM convo.check_size('p_expected', p_expected, convo.max_request_bytes());
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
        ELSE convo.receipt_arguments_error(v_receipt.tool_name, v_receipt.tool_version, p_arguments, p_expected)
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

-- generation_ref: the generation a call names, locked for its transition.
-- CV003 if it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo.generation_ref(p_conversation_id uuid, p_generation_id uuid)
RETURNS convo.generations
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
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
    PERFORM convo.raise_not_found('generation', p_generation_id::text, p_conversation_id,
        (SELECT g.conversation_id FROM convo.generations g WHERE g.id = p_generation_id LIMIT 1));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- generations_transition: a generation starts streaming and ends once:
-- streaming to completed, failed or cancelled, and an ended generation never
-- changes; its identity (prompt, model, params, digest, start) never changes
-- at all, and its answer is an assistant child of its prompt. CV006.
CREATE OR REPLACE FUNCTION convo.generations_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
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

-- receipt_arguments_error: why a receipt's arguments cannot be applied, or
-- NULL: 'invalid_arguments' when they fail the tool version's frozen
-- schema, else 'arg_mismatch' when a top-level key of the route's expected
-- values differs. Shared by fill_receipt and tool_receipts_transition, so a
-- direct UPDATE cannot mark bad arguments valid either.
CREATE OR REPLACE FUNCTION convo.receipt_arguments_error(
    p_tool_name    text,
    p_tool_version int,
    p_arguments    jsonb,
    p_expected     jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
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
-- if there is none.
CREATE OR REPLACE FUNCTION convo.receipt_ref(p_receipt_id uuid)
RETURNS convo.tool_receipts
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_receipt convo.tool_receipts;
BEGIN
    IF p_receipt_id IS NULL THEN
        RAISE EXCEPTION 'p_receipt_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_receipt FROM convo.tool_receipts r WHERE r.id = p_receipt_id FOR UPDATE;
    IF NOT FOUND THEN
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
CREATE OR REPLACE FUNCTION convo.record_tool_call()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
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
    v_fork := convo.fork_point_of(NEW.conversation_id, NEW.message_id);
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
               AND NOT convo.is_on_path(NEW.conversation_id, l.message_id, NEW.message_id)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        PERFORM convo.set_effect_context(NULL, CASE WHEN v_decision = 'rejected'
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
        PERFORM convo.set_effect_context(NULL, NULL);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id)
    VALUES (NEW.conversation_id, NEW.tool_call_id, NEW.message_id, NEW.ordinal, v_effect.id, v_decision, v_fork);
    RETURN NULL;
END;
$$;

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
SET search_path = pg_catalog, convo
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
    PERFORM convo.check_size('the argument schema', p_args_schema, convo.max_request_bytes());
    PERFORM convo.check_args_schema(p_args_schema);
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
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_effect convo.tool_effects;
BEGIN
    PERFORM convo.lock_conversation(p_conversation_id);
    v_effect := convo.effect_ref(p_conversation_id, p_effect_id);
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
    PERFORM convo.check_size('evidence', p_evidence, convo.max_detail_bytes());

    IF v_effect.state = p_state AND v_effect.external_ref IS NOT DISTINCT FROM p_external_ref
       AND v_effect.http_status IS NOT DISTINCT FROM p_http_status
       AND v_effect.error_code IS NOT DISTINCT FROM p_error_code THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'pending' THEN
        RAISE EXCEPTION 'effect % is %: only a pending effect settles', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, asked %s', p_effect_id, v_effect.state, p_state);
    END IF;
    PERFORM convo.set_effect_context(session_user, p_evidence);
    UPDATE convo.tool_effects e
       SET state = p_state, external_ref = p_external_ref, http_status = p_http_status,
           error_code = p_error_code, settled_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo.set_effect_context(NULL, NULL);
END;
$$;

COMMENT ON FUNCTION convo.settle_effect(uuid, uuid, text, text, int, text, jsonb) IS
    'Settle a pending effect: applied (with the external reference) or failed (with an error code); evidence is logged.';

-- tool_effects_log: appends every transition of an effect (its creation
-- from 'requested' included) to tool_effect_events, with the actor and
-- evidence named by set_effect_context, or session_user and none.
CREATE OR REPLACE FUNCTION convo.tool_effects_log()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition (tool_effects_transition let only an identical row through)
    END IF;
    INSERT INTO convo.tool_effect_events (conversation_id, effect_id, from_state, to_state, actor, evidence)
    VALUES (NEW.conversation_id, NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
            coalesce(nullif(current_setting('convo.effect_actor', true), ''), session_user),
            coalesce(nullif(current_setting('convo.effect_evidence', true), '')::jsonb, '{}'));
    RETURN NULL;
END;
$$;

-- tool_effects_transition: the effect state machine, for every statement.
-- A new effect starts in a state reachable from 'requested'; a change of
-- state must be a row of effect_transitions and may set only the columns
-- that row names; without a change of state nothing changes. CV006 otherwise.
CREATE OR REPLACE FUNCTION convo.tool_effects_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_from    text := CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END;
    v_changes text[];
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        IF to_jsonb(NEW) <> to_jsonb(OLD) THEN
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
    IF TG_OP = 'UPDATE' AND to_jsonb(NEW) - v_changes - 'state' <> to_jsonb(OLD) - v_changes - 'state' THEN
        RAISE EXCEPTION 'the transition % to % may change only %', OLD.state, NEW.state, array_to_string(v_changes, ', ')
            USING ERRCODE = 'CV006', DETAIL = format('effect %s', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

-- tool_receipts_transition: a receipt is filed pending and ends once, applied
-- or failed; its owner, key, tool and request never change, its arguments
-- are filled once and are valid only if they pass receipt_arguments_error,
-- and a settled receipt never changes. CV006.
CREATE OR REPLACE FUNCTION convo.tool_receipts_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.arguments IS NOT NULL THEN
            RAISE EXCEPTION 'a receipt is filed pending and unfilled'
                USING ERRCODE = 'CV006', DETAIL = format('receipt %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF to_jsonb(NEW) = to_jsonb(OLD) THEN
        RETURN NEW;
    END IF;
    IF OLD.status <> 'pending'
       OR (NEW.id, NEW.owner_id, NEW.idempotency_key, NEW.tool_name, NEW.tool_version, NEW.request,
           NEW.request_digest, NEW.created_at, NEW.deadline_at)
          IS DISTINCT FROM
          (OLD.id, OLD.owner_id, OLD.idempotency_key, OLD.tool_name, OLD.tool_version, OLD.request,
           OLD.request_digest, OLD.created_at, OLD.deadline_at)
       OR (OLD.arguments IS NOT NULL
           AND (NEW.arguments, NEW.expected, NEW.arguments_valid, NEW.filled_at)
               IS DISTINCT FROM (OLD.arguments, OLD.expected, OLD.arguments_valid, OLD.filled_at)) THEN
        RAISE EXCEPTION 'receipt % is %: this change is not a transition it allows', OLD.id, OLD.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, %s to %s', OLD.id, OLD.status, NEW.status),
                  HINT = 'A receipt goes from pending to applied or failed, once; its arguments are filled once.';
    END IF;
    IF NEW.arguments_valid AND OLD.arguments IS NULL
       AND convo.receipt_arguments_error(NEW.tool_name, NEW.tool_version, NEW.arguments, NEW.expected) IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % arguments are marked valid but fail its tool version or the expected values', OLD.id
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, tool %s version %s', OLD.id, OLD.tool_name, OLD.tool_version);
    END IF;
    RETURN NEW;
END;
$$;

-- tool_ref: the latest registered version of a tool, or CV007: a tool that
-- is not on the allowlist never gets a go-ahead.
CREATE OR REPLACE FUNCTION convo.tool_ref(p_name text)
RETURNS convo.tools
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
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

-- fork_point_of: the fork point of a tool call's message: the parent of the
-- nearest person's turn at or above it (a user message with a part other
-- than tool_result: messages that only carry tool results belong to the
-- agent loop). NULL stands for the conversation itself: that turn has no
-- parent, or there is no such turn.
CREATE OR REPLACE FUNCTION convo.fork_point_of(p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE sql
STABLE
SET search_path = pg_catalog, convo
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

-- generation_stale_after: how long a generation may stream before
-- stale_generations lists it.
CREATE OR REPLACE FUNCTION convo.generation_stale_after()
RETURNS interval
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN interval '10 minutes';

COMMENT ON FUNCTION convo.generation_stale_after() IS 'How long a generation may stream before it is stale (10 minutes).';

-- json_path: the JSON path of an object member, as validation errors name
-- it: $.amount_minor, $["odd key"] (elements are written $.items[2]).
CREATE OR REPLACE FUNCTION convo.json_path(p_parent text, p_key text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN p_parent || CASE WHEN p_key ~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN '.' || p_key
                        ELSE '[' || to_jsonb(p_key)::text || ']' END;

-- max_detail_bytes: the size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_detail_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_detail_bytes() IS 'Size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each); larger input raises CV010.';

-- max_ref_length: the size cap on an external reference, result reference or error code (characters);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_ref_length()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 1024;

COMMENT ON FUNCTION convo.max_ref_length() IS 'Size cap on an external reference, result reference or error code (characters); larger input raises CV010.';

-- max_request_bytes: the size cap on the request or arguments of a receipt (256 KiB of JSON);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_request_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_request_bytes() IS 'Size cap on the request or arguments of a receipt (256 KiB of JSON); larger input raises CV010.';

-- set_effect_context: names the actor and evidence that tool_effects_log
-- writes with the next transition; called with NULLs right after, so a later
-- UPDATE in the same transaction is logged with session_user and no evidence.
CREATE OR REPLACE FUNCTION convo.set_effect_context(p_actor text, p_evidence jsonb)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, convo
BEGIN ATOMIC
    SELECT set_config('convo.effect_actor', coalesce(p_actor, ''), true),
           set_config('convo.effect_evidence', coalesce(p_evidence::text, ''), true);
END;

-- Views (current text in sql/views/, one per file).

-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
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
   AND NOT EXISTS (SELECT 1 FROM convo.tool_effect_calls l
                    WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
                      AND convo.is_on_path(l.conversation_id, l.message_id, c.head_message_id));

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head.';

-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream.
CREATE OR REPLACE VIEW convo.stale_generations AS
SELECT g.conversation_id,
       g.id AS generation_id,
       g.model,
       g.prompt_message_id,
       g.started_at
  FROM convo.generations g
 WHERE g.state = 'streaming'
   AND g.started_at < clock_timestamp() - convo.generation_stale_after();

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';

-- stale_pending_effects: effects still pending or awaiting confirmation past
-- their deadline, with the key a sweeper re-sends (or looks up) under. A
-- pending effect is "unknown", never "not done": it is not failed
-- automatically, only settled on evidence.
CREATE OR REPLACE VIEW convo.stale_pending_effects AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.state,
       e.idempotency_key,
       e.requested_at,
       e.deadline_at
  FROM convo.tool_effects e
 WHERE e.state IN ('pending', 'awaiting_confirmation')
   AND e.deadline_at < clock_timestamp();

COMMENT ON VIEW convo.stale_pending_effects IS
    'Effects pending or awaiting confirmation past their deadline, with the key to re-send or look up under.';

-- Triggers (current text in sql/triggers/, one per file).

-- effect_transitions_fixed: the effect state machine is fixed by the migrations (CV005).
CREATE OR REPLACE TRIGGER effect_transitions_fixed
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON convo.effect_transitions
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change('the fixed effect state machine');
ALTER TABLE convo.effect_transitions ENABLE ALWAYS TRIGGER effect_transitions_fixed;

-- generations_no_delete: generations are records of work done; never deleted (CV005).
CREATE OR REPLACE TRIGGER generations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.generations
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_no_delete;

-- generations_transition: a generation starts streaming and ends once (CV006).
CREATE OR REPLACE TRIGGER generations_transition
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH ROW EXECUTE FUNCTION convo.generations_transition();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_transition;

-- message_parts_record_tool_call: a tool call's ledger decision is written
-- in the statement that stores its tool_use part, before any request leaves.
CREATE OR REPLACE TRIGGER message_parts_record_tool_call
    AFTER INSERT ON convo.message_parts
    FOR EACH ROW
    WHEN (NEW.type = 'tool_use')
    EXECUTE FUNCTION convo.record_tool_call();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_record_tool_call;

-- tool_effect_calls_append_only: a tool call's ledger decision is written once (CV005).
CREATE OR REPLACE TRIGGER tool_effect_calls_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_calls
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_append_only;

-- tool_effect_events_append_only: the effect event log is append-only (CV005).
CREATE OR REPLACE TRIGGER tool_effect_events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_append_only;

-- tool_effects_log: every transition of an effect is appended to tool_effect_events.
CREATE OR REPLACE TRIGGER tool_effects_log
    AFTER INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo.tool_effects_log();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_log;

-- tool_effects_no_delete: an effect is never deleted (CV005); abandoning a branch is not a transition.
CREATE OR REPLACE TRIGGER tool_effects_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_effects
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_no_delete;

-- tool_effects_transition: every change of an effect is a transition of its state machine (CV006).
CREATE OR REPLACE TRIGGER tool_effects_transition
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo.tool_effects_transition();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_transition;

-- tool_receipts_no_delete: a receipt is never deleted (CV005).
CREATE OR REPLACE TRIGGER tool_receipts_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_no_delete;

-- tool_receipts_transition: a receipt goes from pending to applied or failed, once (CV006).
CREATE OR REPLACE TRIGGER tool_receipts_transition
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW EXECUTE FUNCTION convo.tool_receipts_transition();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_transition;

-- tools_append_only: a registered tool version is frozen (CV005); other settings make the next version.
CREATE OR REPLACE TRIGGER tools_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tools
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_append_only;
