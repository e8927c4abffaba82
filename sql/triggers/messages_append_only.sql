-- messages_append_only: convo.messages is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER messages_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_append_only;
