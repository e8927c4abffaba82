-- sql/access/tables.sql: the two schemas, created before any domain's tables, as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE SCHEMA convo;
COMMENT ON SCHEMA convo IS 'pgconvo: the conversation tree, its head log, and (later) effects and receipts.';

CREATE SCHEMA convo_private;
COMMENT ON SCHEMA convo_private IS 'pgconvo''s machinery: only the owner role convo_owner uses it; the API is schema convo.';
