-- import_origins_no_forgery: only the import functions write origin records
-- (an origin is what marks a message as imported: is_imported).
CREATE OR REPLACE TRIGGER import_origins_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_no_forgery;
