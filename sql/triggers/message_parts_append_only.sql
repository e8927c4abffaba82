-- message_parts_append_only: rows of convo.message_parts are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is message_parts_erasure_only's.
CREATE OR REPLACE TRIGGER message_parts_append_only
    BEFORE DELETE OR TRUNCATE ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_append_only;
