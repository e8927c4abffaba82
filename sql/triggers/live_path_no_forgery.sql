-- live_path_no_forgery: the live-path index is written only by the package's
-- own head moves and message inserts (refuse_forgery): a role given table
-- privileges cannot make path show another branch than the head's.
CREATE OR REPLACE TRIGGER live_path_no_forgery
    BEFORE INSERT OR UPDATE OR DELETE ON convo.live_path
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.live_path ENABLE ALWAYS TRIGGER live_path_no_forgery;
