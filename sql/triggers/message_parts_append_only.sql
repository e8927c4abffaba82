-- message_parts_append_only: convo.message_parts is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER message_parts_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_append_only;
