-- conversations_no_delete: a conversation is never deleted (erasure redacts
-- content and keeps the shape), so DELETE and TRUNCATE raise CV005.
CREATE OR REPLACE TRIGGER conversations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.conversations
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_no_delete;
