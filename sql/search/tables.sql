-- sql/search/tables.sql: the tables of the search domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TABLE convo_private.message_search (
    conversation_id uuid NOT NULL,
    message_id uuid NOT NULL,
    document tsvector NOT NULL,
    CONSTRAINT message_search_pkey PRIMARY KEY (conversation_id, message_id)
);
CREATE INDEX message_search_document_idx ON convo_private.message_search USING gin (document);
COMMENT ON TABLE convo_private.message_search IS 'Derived: the search index, one row a message with text: its text parts under the search configuration and its owner''s lexeme; erasure removes a conversation''s rows.';
