-- sql/generations/tables.sql: the tables of the generations domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo.generations (
    conversation_id uuid NOT NULL,
    id uuid NOT NULL,
    prompt_message_id uuid NOT NULL,
    head_at_begin uuid,
    model text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    request_digest text,
    state text DEFAULT 'streaming'::text NOT NULL,
    message_id uuid,
    usage jsonb,
    finish_reason text,
    error_code text,
    error jsonb,
    started_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    finished_at timestamp with time zone,
    import_id uuid,
    CONSTRAINT generations_pkey PRIMARY KEY (conversation_id, id),
    CONSTRAINT generations_check CHECK ((state = 'streaming'::text) = (finished_at IS NULL)),
    CONSTRAINT generations_check2 CHECK ((state = 'completed'::text) = (usage IS NOT NULL)),
    CONSTRAINT generations_check3 CHECK ((state = 'failed'::text) = (error_code IS NOT NULL)),
    CONSTRAINT generations_check4 CHECK ((state = 'failed'::text) = (error IS NOT NULL)),
    CONSTRAINT generations_message_check CHECK (
CASE state
    WHEN 'completed'::text THEN message_id IS NOT NULL
    WHEN 'streaming'::text THEN message_id IS NULL
    ELSE true
END),
    CONSTRAINT generations_model_check CHECK (model <> ''::text),
    CONSTRAINT generations_params_check CHECK (jsonb_typeof(params) = 'object'::text),
    CONSTRAINT generations_state_check CHECK (state = ANY (ARRAY['streaming'::text, 'completed'::text, 'failed'::text, 'cancelled'::text]))
);
CREATE UNIQUE INDEX generations_message_key ON convo.generations USING btree (conversation_id, message_id) WHERE (message_id IS NOT NULL);
CREATE INDEX generations_streaming_idx ON convo.generations USING btree (started_at) WHERE (state = 'streaming'::text);
ALTER TABLE convo.generations ENABLE ROW LEVEL SECURITY;
CREATE POLICY generations_reader_reads_all ON convo.generations AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.generations IS 'One model call: the prompt it answered, streaming until completed (its message), failed or cancelled; a finished one is never changed.';

-- Foreign keys, added once every domain's tables exist.

ALTER TABLE convo.generations ADD CONSTRAINT generations_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES convo.conversations(id);
COMMENT ON CONSTRAINT generations_conversation_id_fkey ON convo.generations IS NULL;
ALTER TABLE convo.generations ADD CONSTRAINT generations_conversation_id_head_at_begin_fkey FOREIGN KEY (conversation_id, head_at_begin) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT generations_conversation_id_head_at_begin_fkey ON convo.generations IS NULL;
ALTER TABLE convo.generations ADD CONSTRAINT generations_conversation_id_message_id_fkey FOREIGN KEY (conversation_id, message_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT generations_conversation_id_message_id_fkey ON convo.generations IS NULL;
ALTER TABLE convo.generations ADD CONSTRAINT generations_conversation_id_prompt_message_id_fkey FOREIGN KEY (conversation_id, prompt_message_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT generations_conversation_id_prompt_message_id_fkey ON convo.generations IS NULL;
ALTER TABLE convo.generations ADD CONSTRAINT generations_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT generations_import_fkey ON convo.generations IS NULL;
