-- conversations_90_no_delete: conversations are never deleted, by any role.
CREATE OR REPLACE TRIGGER conversations_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.conversations
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_90_no_delete;
