-- import_origins_no_forgery: only the import functions write origin records,
-- the source nodes kept verbatim beside the messages.
CREATE OR REPLACE TRIGGER import_origins_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_no_forgery;
