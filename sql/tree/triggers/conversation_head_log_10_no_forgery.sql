-- conversation_head_log_10_no_forgery: only pgconvo's code (or a superuser)
-- writes head-log rows, so a reason or mover reaches the log only through the
-- API (a direct head UPDATE is logged as direct_update).
CREATE OR REPLACE TRIGGER conversation_head_log_10_no_forgery
    BEFORE INSERT ON convo.conversation_head_log
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_10_no_forgery;
