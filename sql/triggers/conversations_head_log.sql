-- conversations_head_log: every change of a head, by any statement (the API
-- or a direct UPDATE by the owner), writes exactly one head-log row in the
-- same transaction. An UPDATE that leaves the head where it is writes none.
CREATE OR REPLACE TRIGGER conversations_head_log
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id)
    EXECUTE FUNCTION convo_private.log_head_move();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_head_log;
