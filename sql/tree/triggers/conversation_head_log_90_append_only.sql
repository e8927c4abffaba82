-- conversation_head_log_90_append_only: the head log is append-only, for
-- every role, the owner role included.
CREATE OR REPLACE TRIGGER conversation_head_log_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.conversation_head_log
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_90_append_only;
