-- conversation_head_log_notify: every head-log row is sent to channel convo_head (ids, seq, reason).
CREATE OR REPLACE TRIGGER conversation_head_log_notify
    AFTER INSERT ON convo.conversation_head_log
    FOR EACH ROW EXECUTE FUNCTION convo_private.notify_head_move();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_notify;
