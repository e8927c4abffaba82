-- conversation_changes_90_append_only: change rows are never deleted, by any role.
CREATE OR REPLACE TRIGGER conversation_changes_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.conversation_changes
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversation_changes ENABLE ALWAYS TRIGGER conversation_changes_90_append_only;
