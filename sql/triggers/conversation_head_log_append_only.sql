-- conversation_head_log_append_only: convo.conversation_head_log is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER conversation_head_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.conversation_head_log
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_append_only;
