-- sql/operations/tables.sql: the tables of the operations domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo_private.settings (
    singleton boolean DEFAULT true NOT NULL,
    deletion_retention interval DEFAULT '30 days'::interval NOT NULL,
    search_config text DEFAULT 'simple'::text NOT NULL,
    set_by text NOT NULL,
    set_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    live_updates boolean DEFAULT true NOT NULL,
    CONSTRAINT settings_pkey PRIMARY KEY (singleton),
    CONSTRAINT settings_deletion_retention_check CHECK (deletion_retention >= '00:00:00'::interval AND deletion_retention <= '100 years'::interval),
    CONSTRAINT settings_search_config_check CHECK (search_config::regconfig IS NOT NULL),
    CONSTRAINT settings_singleton_check CHECK (singleton)
);
COMMENT ON TABLE convo_private.settings IS 'The settings a DBA sets (one row, none until set): the retention period of deleted conversations, the text search configuration, whether live-update notifications are sent, who set them last and when.';
