-- owner_erasures_10_no_forgery: only erase_owner (or a superuser) records
-- an erasure of an owner's receipts.
CREATE OR REPLACE TRIGGER owner_erasures_10_no_forgery
    BEFORE INSERT ON convo.owner_erasures
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.owner_erasures ENABLE ALWAYS TRIGGER owner_erasures_10_no_forgery;
