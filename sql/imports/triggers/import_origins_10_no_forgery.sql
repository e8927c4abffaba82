-- import_origins_10_no_forgery: only the import functions (or a superuser)
-- write origin records, the source nodes kept verbatim beside the messages.
CREATE OR REPLACE TRIGGER import_origins_10_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_10_no_forgery;
