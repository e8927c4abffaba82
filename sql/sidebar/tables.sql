-- sql/sidebar/tables.sql: the tables of the sidebar domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo.conversation_changes (
    conversation_id uuid NOT NULL,
    seq bigint NOT NULL,
    field text NOT NULL,
    old_value text,
    new_value text,
    changed_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    changed_by text,
    source_seq bigint,
    import_id uuid,
    CONSTRAINT conversation_changes_pkey PRIMARY KEY (conversation_id, seq),
    CONSTRAINT conversation_changes_field_check CHECK (field = ANY (ARRAY['title'::text, 'archived'::text, 'deleted'::text])),
    CONSTRAINT conversation_changes_flag_check CHECK ((field <> ALL (ARRAY['archived'::text, 'deleted'::text])) OR (old_value = ANY (ARRAY['true'::text, 'false'::text])) AND (new_value = ANY (ARRAY['true'::text, 'false'::text])) AND old_value <> new_value),
    CONSTRAINT conversation_changes_title_length CHECK (length(old_value) <= 1000 AND length(new_value) <= 1000)
);
ALTER TABLE convo.conversation_changes ENABLE ROW LEVEL SECURITY;
CREATE POLICY conversation_changes_reader_reads_all ON convo.conversation_changes AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.conversation_changes IS 'Every change of a conversation''s title, archive state or deletion: seq per conversation, old and new value, who and when; append-only (erasure empties titles).';

-- Foreign keys, added once every domain's tables exist.

ALTER TABLE convo.conversation_changes ADD CONSTRAINT conversation_changes_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES convo.conversations(id);
COMMENT ON CONSTRAINT conversation_changes_conversation_id_fkey ON convo.conversation_changes IS NULL;
ALTER TABLE convo.conversation_changes ADD CONSTRAINT conversation_changes_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT conversation_changes_import_fkey ON convo.conversation_changes IS NULL;
