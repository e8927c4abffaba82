-- sql/imports/tables.sql: the tables of the imports domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo.import_origins (
    conversation_id uuid NOT NULL,
    message_id uuid NOT NULL,
    source text NOT NULL,
    node_key text NOT NULL,
    node jsonb NOT NULL,
    CONSTRAINT import_origins_pkey PRIMARY KEY (conversation_id, message_id),
    CONSTRAINT import_origins_source_check CHECK (source = ANY (ARRAY['chatgpt'::text, 'openwebui'::text, 'librechat'::text]))
);
ALTER TABLE convo.import_origins ENABLE ROW LEVEL SECURITY;
CREATE POLICY import_origins_reader_reads_all ON convo.import_origins AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.import_origins IS 'The source node of each imported message, verbatim (erasure empties it); append-only.';

CREATE TABLE convo.imports (
    conversation_id uuid NOT NULL,
    id uuid NOT NULL,
    owner_id text NOT NULL,
    format text NOT NULL,
    source_key text,
    digest text,
    imported_by text DEFAULT COALESCE(NULLIF(current_setting('role'::text), 'none'::text), SESSION_USER::text) NOT NULL,
    imported_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    import_id uuid,
    CONSTRAINT imports_pkey PRIMARY KEY (conversation_id, id),
    CONSTRAINT imports_format_check CHECK (format = ANY (ARRAY['chatgpt'::text, 'openwebui'::text, 'librechat'::text, 'pgconvo'::text]))
);
CREATE UNIQUE INDEX imports_source_key ON convo.imports USING btree (owner_id, format, source_key, digest, conversation_id) WHERE (import_id IS NULL);
ALTER TABLE convo.imports ENABLE ROW LEVEL SECURITY;
CREATE POLICY imports_reader_reads_all ON convo.imports AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.imports IS 'The record of every import (who, when, format, source key, keyed digest); append-only, erasure empties source key and digest.';

-- Foreign keys, added once every domain's tables exist.

ALTER TABLE convo.import_origins ADD CONSTRAINT import_origins_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES convo.conversations(id);
COMMENT ON CONSTRAINT import_origins_conversation_id_fkey ON convo.import_origins IS NULL;
ALTER TABLE convo.import_origins ADD CONSTRAINT import_origins_message_fkey FOREIGN KEY (conversation_id, message_id) REFERENCES convo.messages(conversation_id, id) DEFERRABLE INITIALLY DEFERRED;
COMMENT ON CONSTRAINT import_origins_message_fkey ON convo.import_origins IS NULL;

ALTER TABLE convo.imports ADD CONSTRAINT imports_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES convo.conversations(id);
COMMENT ON CONSTRAINT imports_conversation_id_fkey ON convo.imports IS NULL;
ALTER TABLE convo.imports ADD CONSTRAINT imports_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT imports_import_fkey ON convo.imports IS NULL;
