-- import_origins_90_append_only: origin records are never deleted.
CREATE OR REPLACE TRIGGER import_origins_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.import_origins
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_90_append_only;
