-- conversation_head_log_notify: every head-log row is sent to channel convo_head (ids, seq, reason).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER conversation_head_log_notify
    AFTER INSERT ON convo.conversation_head_log
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_head_move();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_notify;
