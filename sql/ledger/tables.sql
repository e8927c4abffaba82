-- sql/ledger/tables.sql: the tables of the ledger domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo.effect_transitions (
    from_state text NOT NULL,
    to_state text NOT NULL,
    changes text[] NOT NULL,
    CONSTRAINT effect_transitions_pkey PRIMARY KEY (from_state, to_state)
);
COMMENT ON TABLE convo.effect_transitions IS 'The effect state machine: each allowed move of tool_effects.state and the columns it may change; fixed.';

CREATE TABLE convo.tool_effect_calls (
    conversation_id uuid NOT NULL,
    tool_call_id text NOT NULL,
    message_id uuid NOT NULL,
    ordinal integer NOT NULL,
    effect_id uuid,
    decision text NOT NULL,
    fork_point_id uuid,
    decided_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    import_id uuid,
    tool_name text NOT NULL,
    tool_version integer NOT NULL,
    branch_id uuid,
    depth integer,
    CONSTRAINT tool_effect_calls_pkey PRIMARY KEY (conversation_id, tool_call_id),
    CONSTRAINT tool_effect_calls_check CHECK ((decision = 'replay'::text) = (effect_id IS NULL)),
    CONSTRAINT tool_effect_calls_decision_check CHECK (decision = ANY (ARRAY['execute'::text, 'reuse'::text, 'confirm'::text, 'rejected'::text, 'replay'::text])),
    CONSTRAINT tool_effect_calls_place_check CHECK ((branch_id IS NULL) = (depth IS NULL))
);
CREATE INDEX tool_effect_calls_effect_idx ON convo.tool_effect_calls USING btree (conversation_id, effect_id);
CREATE INDEX tool_effect_calls_rerun_idx ON convo.tool_effect_calls USING btree (conversation_id, COALESCE(fork_point_id, conversation_id), tool_name, branch_id, depth, decided_at, tool_call_id);
ALTER TABLE convo.tool_effect_calls ENABLE ROW LEVEL SECURITY;
CREATE POLICY tool_effect_calls_reader_reads_all ON convo.tool_effect_calls AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.tool_effect_calls IS 'Each tool call of a message and its ledger decision (new effect, repeat, paused, read-only), made before a request can leave; append-only.';

CREATE TABLE convo.tool_effect_events (
    conversation_id uuid NOT NULL,
    effect_id uuid NOT NULL,
    seq bigint NOT NULL,
    from_state text NOT NULL,
    to_state text NOT NULL,
    actor text,
    evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    source_seq bigint,
    import_id uuid,
    CONSTRAINT tool_effect_events_pkey PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX tool_effect_events_effect_idx ON convo.tool_effect_events USING btree (conversation_id, effect_id, seq);
ALTER TABLE convo.tool_effect_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY tool_effect_events_reader_reads_all ON convo.tool_effect_events AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.tool_effect_events IS 'Each state change of an effect, seq per conversation, with who and the evidence; append-only.';

CREATE TABLE convo.tool_effects (
    conversation_id uuid NOT NULL,
    id uuid NOT NULL,
    tool_name text NOT NULL,
    tool_version integer NOT NULL,
    idempotency_key text NOT NULL,
    scope_key text NOT NULL,
    state text NOT NULL,
    arguments jsonb NOT NULL,
    amount_minor bigint,
    currency character(3),
    repeats_effect_id uuid,
    requested_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    deadline_at timestamp with time zone NOT NULL,
    confirmed_by text,
    confirmed_at timestamp with time zone,
    settled_at timestamp with time zone,
    external_ref text,
    http_status integer,
    error_code text,
    compensated_by text,
    compensated_at timestamp with time zone,
    import_id uuid,
    CONSTRAINT tool_effects_pkey PRIMARY KEY (conversation_id, id),
    CONSTRAINT tool_effects_conversation_id_idempotency_key_key UNIQUE (conversation_id, idempotency_key),
    CONSTRAINT tool_effects_conversation_id_scope_key_key UNIQUE (conversation_id, scope_key),
    CONSTRAINT tool_effects_check CHECK (repeats_effect_id IS DISTINCT FROM id),
    CONSTRAINT tool_effects_check1 CHECK ((state = ANY (ARRAY['applied'::text, 'failed'::text, 'compensated'::text])) = (settled_at IS NOT NULL)),
    CONSTRAINT tool_effects_check10 CHECK (http_status IS NULL OR (state = ANY (ARRAY['applied'::text, 'failed'::text, 'compensated'::text]))),
    CONSTRAINT tool_effects_check2 CHECK ((state = ANY (ARRAY['applied'::text, 'compensated'::text])) = (external_ref IS NOT NULL)),
    CONSTRAINT tool_effects_check3 CHECK ((state = 'failed'::text) = (error_code IS NOT NULL)),
    CONSTRAINT tool_effects_check4 CHECK ((state = 'compensated'::text) = (compensated_by IS NOT NULL)),
    CONSTRAINT tool_effects_check5 CHECK ((compensated_by IS NULL) = (compensated_at IS NULL)),
    CONSTRAINT tool_effects_check6 CHECK ((confirmed_by IS NULL) = (confirmed_at IS NULL)),
    CONSTRAINT tool_effects_check7 CHECK (state <> 'awaiting_confirmation'::text OR confirmed_by IS NULL),
    CONSTRAINT tool_effects_check8 CHECK (state <> 'awaiting_confirmation'::text OR repeats_effect_id IS NOT NULL AND idempotency_key = scope_key),
    CONSTRAINT tool_effects_check9 CHECK (confirmed_by IS NULL OR repeats_effect_id IS NOT NULL AND idempotency_key <> scope_key),
    CONSTRAINT tool_effects_confirmed_by_check CHECK (confirmed_by <> ''::text),
    CONSTRAINT tool_effects_currency_check CHECK (currency ~ '^[A-Z]{3}$'::text),
    CONSTRAINT tool_effects_http_status_check CHECK (http_status >= 100 AND http_status <= 599),
    CONSTRAINT tool_effects_idempotency_key_check CHECK (length(idempotency_key) >= 8 AND length(idempotency_key) <= 255),
    CONSTRAINT tool_effects_state_check CHECK (state = ANY (ARRAY['awaiting_confirmation'::text, 'pending'::text, 'applied'::text, 'failed'::text, 'compensated'::text]))
);
CREATE INDEX tool_effects_applied_idx ON convo.tool_effects USING btree (conversation_id) WHERE (state = 'applied'::text);
CREATE INDEX tool_effects_open_idx ON convo.tool_effects USING btree (deadline_at) WHERE (state = ANY (ARRAY['pending'::text, 'awaiting_confirmation'::text]));
ALTER TABLE convo.tool_effects ENABLE ROW LEVEL SECURITY;
CREATE POLICY tool_effects_reader_reads_all ON convo.tool_effects AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.tool_effects IS 'The effects ledger: what an effectful tool call does to the world, keyed for deduplication, in the state machine of effect_transitions.';

CREATE TABLE convo.tools (
    name text NOT NULL,
    version integer NOT NULL,
    effectful boolean NOT NULL,
    args_schema jsonb NOT NULL,
    idempotency_scope text NOT NULL,
    deadline interval NOT NULL,
    amount_arg text,
    currency_arg text,
    registered_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    registered_by text DEFAULT COALESCE(NULLIF(current_setting('role'::text), 'none'::text), SESSION_USER::text) NOT NULL,
    CONSTRAINT tools_pkey PRIMARY KEY (name, version),
    CONSTRAINT tools_args_schema_check CHECK (jsonb_typeof(args_schema) = ANY (ARRAY['object'::text, 'boolean'::text])),
    CONSTRAINT tools_deadline_check CHECK (deadline > '00:00:00'::interval),
    CONSTRAINT tools_idempotency_scope_check CHECK (idempotency_scope = ANY (ARRAY['tool_call'::text, 'conversation_args'::text, 'fork_args'::text])),
    CONSTRAINT tools_name_check CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$'::text),
    CONSTRAINT tools_version_check CHECK (version >= 1)
);
COMMENT ON TABLE convo.tools IS 'The tool registry: each name and version with its frozen argument schema, whether it is effectful, its idempotency scope and deadline; append-only.';

-- Foreign keys, added once every domain's tables exist.

ALTER TABLE convo.tool_effect_calls ADD CONSTRAINT tool_effect_calls_conversation_id_effect_id_fkey FOREIGN KEY (conversation_id, effect_id) REFERENCES convo.tool_effects(conversation_id, id);
COMMENT ON CONSTRAINT tool_effect_calls_conversation_id_effect_id_fkey ON convo.tool_effect_calls IS NULL;
ALTER TABLE convo.tool_effect_calls ADD CONSTRAINT tool_effect_calls_conversation_id_fork_point_id_fkey FOREIGN KEY (conversation_id, fork_point_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT tool_effect_calls_conversation_id_fork_point_id_fkey ON convo.tool_effect_calls IS NULL;
ALTER TABLE convo.tool_effect_calls ADD CONSTRAINT tool_effect_calls_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT tool_effect_calls_import_fkey ON convo.tool_effect_calls IS NULL;
ALTER TABLE convo.tool_effect_calls ADD CONSTRAINT tool_effect_calls_part_fkey FOREIGN KEY (conversation_id, message_id, ordinal) REFERENCES convo.keyed_parts(conversation_id, message_id, ordinal);
COMMENT ON CONSTRAINT tool_effect_calls_part_fkey ON convo.tool_effect_calls IS NULL;
ALTER TABLE convo.tool_effect_calls ADD CONSTRAINT tool_effect_calls_tool_fkey FOREIGN KEY (tool_name, tool_version) REFERENCES convo.tools(name, version);
COMMENT ON CONSTRAINT tool_effect_calls_tool_fkey ON convo.tool_effect_calls IS NULL;

ALTER TABLE convo.tool_effect_events ADD CONSTRAINT tool_effect_events_conversation_id_effect_id_fkey FOREIGN KEY (conversation_id, effect_id) REFERENCES convo.tool_effects(conversation_id, id);
COMMENT ON CONSTRAINT tool_effect_events_conversation_id_effect_id_fkey ON convo.tool_effect_events IS NULL;
ALTER TABLE convo.tool_effect_events ADD CONSTRAINT tool_effect_events_from_state_to_state_fkey FOREIGN KEY (from_state, to_state) REFERENCES convo.effect_transitions(from_state, to_state);
COMMENT ON CONSTRAINT tool_effect_events_from_state_to_state_fkey ON convo.tool_effect_events IS NULL;
ALTER TABLE convo.tool_effect_events ADD CONSTRAINT tool_effect_events_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT tool_effect_events_import_fkey ON convo.tool_effect_events IS NULL;

ALTER TABLE convo.tool_effects ADD CONSTRAINT tool_effects_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES convo.conversations(id);
COMMENT ON CONSTRAINT tool_effects_conversation_id_fkey ON convo.tool_effects IS NULL;
ALTER TABLE convo.tool_effects ADD CONSTRAINT tool_effects_conversation_id_repeats_effect_id_fkey FOREIGN KEY (conversation_id, repeats_effect_id) REFERENCES convo.tool_effects(conversation_id, id);
COMMENT ON CONSTRAINT tool_effects_conversation_id_repeats_effect_id_fkey ON convo.tool_effects IS NULL;
ALTER TABLE convo.tool_effects ADD CONSTRAINT tool_effects_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT tool_effects_import_fkey ON convo.tool_effects IS NULL;
ALTER TABLE convo.tool_effects ADD CONSTRAINT tool_effects_tool_name_tool_version_fkey FOREIGN KEY (tool_name, tool_version) REFERENCES convo.tools(name, version);
COMMENT ON CONSTRAINT tool_effects_tool_name_tool_version_fkey ON convo.tool_effects IS NULL;
