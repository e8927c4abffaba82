-- import_origins.source names the import that wrote the row: LibreChat's
-- export (import_librechat) is a third.
ALTER TABLE convo.import_origins DROP CONSTRAINT import_origins_source_check;
ALTER TABLE convo.import_origins ADD CONSTRAINT import_origins_source_check
    CHECK (source IN ('chatgpt', 'openwebui', 'librechat'));
