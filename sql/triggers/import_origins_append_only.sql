-- import_origins_append_only: an import's origin records are never deleted:
-- DELETE and TRUNCATE are refused for every role (UPDATE: import_origins_erasure_only).
CREATE OR REPLACE TRIGGER import_origins_append_only
    BEFORE DELETE OR TRUNCATE ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_append_only;
