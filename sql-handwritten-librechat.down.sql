-- Table changes reversed, below the objects. The old CHECK refuses the
-- origins of LibreChat imports: with any in the database this step fails,
-- and the down with it, rather than leave rows its constraint denies.
ALTER TABLE convo.import_origins DROP CONSTRAINT import_origins_source_check;
ALTER TABLE convo.import_origins ADD CONSTRAINT import_origins_source_check
    CHECK (source IN ('chatgpt', 'openwebui'));
