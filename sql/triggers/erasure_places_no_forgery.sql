-- erasure_places_no_forgery: only erase_conversation and erase_owner record an
-- erasure (refuse_forgery), and a recorded erasure is what lets the
-- redaction past the append-only triggers; any other role gets CV005.
CREATE OR REPLACE TRIGGER erasure_places_no_forgery
    BEFORE INSERT ON convo.erasure_places
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_no_forgery;
