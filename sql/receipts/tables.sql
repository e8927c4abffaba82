-- sql/receipts/tables.sql: the tables of the receipts domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo.tool_receipts (
    id uuid NOT NULL,
    owner_id text NOT NULL,
    idempotency_key text NOT NULL,
    tool_name text NOT NULL,
    tool_version integer NOT NULL,
    request jsonb NOT NULL,
    request_digest text,
    arguments jsonb,
    expected jsonb,
    arguments_valid boolean,
    status text DEFAULT 'pending'::text NOT NULL,
    http_status integer,
    error_code text,
    result_ref text,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    deadline_at timestamp with time zone NOT NULL,
    filled_at timestamp with time zone,
    settled_at timestamp with time zone,
    CONSTRAINT tool_receipts_pkey PRIMARY KEY (owner_id, id),
    CONSTRAINT tool_receipts_owner_id_idempotency_key_key UNIQUE (owner_id, idempotency_key),
    CONSTRAINT tool_receipts_check CHECK ((status = 'pending'::text) = (settled_at IS NULL)),
    CONSTRAINT tool_receipts_check1 CHECK ((status = 'pending'::text) = (http_status IS NULL)),
    CONSTRAINT tool_receipts_check2 CHECK ((status = 'applied'::text) = (result_ref IS NOT NULL)),
    CONSTRAINT tool_receipts_check3 CHECK ((status = 'failed'::text) = (error_code IS NOT NULL)),
    CONSTRAINT tool_receipts_check4 CHECK (status <> 'applied'::text OR arguments_valid IS TRUE),
    CONSTRAINT tool_receipts_check5 CHECK ((arguments IS NULL) = (filled_at IS NULL)),
    CONSTRAINT tool_receipts_check6 CHECK ((arguments IS NULL) = (arguments_valid IS NULL)),
    CONSTRAINT tool_receipts_http_status_check CHECK (http_status >= 100 AND http_status <= 599),
    CONSTRAINT tool_receipts_idempotency_key_check CHECK (length(idempotency_key) >= 8 AND length(idempotency_key) <= 255),
    CONSTRAINT tool_receipts_owner_id_check CHECK (owner_id <> ''::text),
    CONSTRAINT tool_receipts_owner_id_length CHECK (length(owner_id) <= 255),
    CONSTRAINT tool_receipts_request_digest_erased CHECK (request_digest IS NOT NULL OR request = '{}'::jsonb),
    CONSTRAINT tool_receipts_status_check CHECK (status = ANY (ARRAY['pending'::text, 'applied'::text, 'failed'::text])),
    CONSTRAINT tool_receipts_status_class CHECK ((status <> 'applied'::text OR http_status >= 200 AND http_status <= 299) AND (status <> 'failed'::text OR http_status >= 400 AND http_status <= 599))
);
CREATE INDEX tool_receipts_id_idx ON convo.tool_receipts USING btree (id);
CREATE INDEX tool_receipts_pending_idx ON convo.tool_receipts USING btree (deadline_at) WHERE (status = 'pending'::text);
ALTER TABLE convo.tool_receipts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tool_receipts_reader_reads_all ON convo.tool_receipts AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.tool_receipts IS 'A route-initiated mutation: the request (digest keyed), arguments validated against the tool''s frozen schema, then applied or failed with an HTTP-style status.';

-- Foreign keys, added once every domain's tables exist.

ALTER TABLE convo.tool_receipts ADD CONSTRAINT tool_receipts_tool_name_tool_version_fkey FOREIGN KEY (tool_name, tool_version) REFERENCES convo.tools(name, version);
COMMENT ON CONSTRAINT tool_receipts_tool_name_tool_version_fkey ON convo.tool_receipts IS NULL;
