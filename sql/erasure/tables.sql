-- sql/erasure/tables.sql: the tables of the erasure domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo.erasure_places (
    owner_id text NOT NULL,
    erasure_id uuid NOT NULL,
    place text NOT NULL,
    rows_redacted bigint NOT NULL,
    conversation_id uuid NOT NULL,
    CONSTRAINT erasure_places_pkey PRIMARY KEY (conversation_id, erasure_id, place),
    CONSTRAINT erasure_places_rows_redacted_check CHECK (rows_redacted > 0)
);
ALTER TABLE convo.erasure_places ENABLE ROW LEVEL SECURITY;
CREATE POLICY erasure_places_reader_reads_all ON convo.erasure_places AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.erasure_places IS 'Rows redacted by each erasure, per table; append-only.';

CREATE TABLE convo.erasures (
    owner_id text NOT NULL,
    id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    reason text NOT NULL,
    erased_by text DEFAULT COALESCE(NULLIF(current_setting('role'::text), 'none'::text), SESSION_USER::text) NOT NULL,
    erased_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    import_id uuid,
    CONSTRAINT erasures_pkey PRIMARY KEY (conversation_id, id),
    CONSTRAINT erasures_owner_id_check CHECK (owner_id <> ''::text),
    CONSTRAINT erasures_reason_check CHECK (btrim(reason) <> ''::text)
);
ALTER TABLE convo.erasures ENABLE ROW LEVEL SECURITY;
CREATE POLICY erasures_reader_reads_all ON convo.erasures AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.erasures IS 'Every erasure of a conversation (who, when, why), a repeat too; append-only.';

CREATE TABLE convo.owner_erasures (
    owner_id text NOT NULL,
    id uuid NOT NULL,
    reason text NOT NULL,
    erased_by text DEFAULT COALESCE(NULLIF(current_setting('role'::text), 'none'::text), SESSION_USER::text) NOT NULL,
    erased_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    receipts_redacted bigint NOT NULL,
    CONSTRAINT owner_erasures_pkey PRIMARY KEY (owner_id, id),
    CONSTRAINT owner_erasures_owner_id_check CHECK (owner_id <> ''::text),
    CONSTRAINT owner_erasures_reason_check CHECK (btrim(reason) <> ''::text),
    CONSTRAINT owner_erasures_receipts_redacted_check CHECK (receipts_redacted >= 0)
);
ALTER TABLE convo.owner_erasures ENABLE ROW LEVEL SECURITY;
CREATE POLICY owner_erasures_reader_reads_all ON convo.owner_erasures AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.owner_erasures IS 'Each erasure of an owner''s receipts (erase_owner): who, when, why, how many receipts it redacted. Append-only.';

CREATE TABLE convo_private.digest_key (
    singleton boolean DEFAULT true NOT NULL,
    inner_pad bytea NOT NULL,
    outer_pad bytea NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT digest_key_pkey PRIMARY KEY (singleton),
    CONSTRAINT digest_key_inner_pad_check CHECK (length(inner_pad) = 64),
    CONSTRAINT digest_key_outer_pad_check CHECK (length(outer_pad) = 64),
    CONSTRAINT digest_key_singleton_check CHECK (singleton)
);
COMMENT ON TABLE convo_private.digest_key IS 'The secret under which every stored digest of content is keyed (keyed_digest); losing it loses the recognition of repeated calls and requests.';

-- Foreign keys, added once every domain's tables exist.

ALTER TABLE convo.erasure_places ADD CONSTRAINT erasure_places_erasure_fkey FOREIGN KEY (conversation_id, erasure_id) REFERENCES convo.erasures(conversation_id, id);
COMMENT ON CONSTRAINT erasure_places_erasure_fkey ON convo.erasure_places IS NULL;

ALTER TABLE convo.erasures ADD CONSTRAINT erasures_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES convo.conversations(id);
COMMENT ON CONSTRAINT erasures_conversation_id_fkey ON convo.erasures IS NULL;
ALTER TABLE convo.erasures ADD CONSTRAINT erasures_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT erasures_import_fkey ON convo.erasures IS NULL;
