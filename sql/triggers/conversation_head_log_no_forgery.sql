-- conversation_head_log_no_forgery: rows of convo.conversation_head_log are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER conversation_head_log_no_forgery
    BEFORE INSERT ON convo.conversation_head_log
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_no_forgery;
