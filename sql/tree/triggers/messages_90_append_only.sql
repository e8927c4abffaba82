-- messages_90_append_only: messages are never deleted, by any role.
CREATE OR REPLACE TRIGGER messages_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_90_append_only;
