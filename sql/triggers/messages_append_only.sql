-- messages_append_only: rows of convo.messages are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is messages_erasure_only's.
CREATE OR REPLACE TRIGGER messages_append_only
    BEFORE DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_append_only;
