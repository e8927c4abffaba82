-- erasure_places_10_no_forgery: only erasure (or a superuser) records where
-- it redacted.
CREATE OR REPLACE TRIGGER erasure_places_10_no_forgery
    BEFORE INSERT ON convo.erasure_places
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_10_no_forgery;
