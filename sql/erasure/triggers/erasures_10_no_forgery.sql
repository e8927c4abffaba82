-- erasures_10_no_forgery: only erase_conversation and erase_owner (or a
-- superuser) record an erasure.
CREATE OR REPLACE TRIGGER erasures_10_no_forgery
    BEFORE INSERT ON convo.erasures
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_10_no_forgery;
