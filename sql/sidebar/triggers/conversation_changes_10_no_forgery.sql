-- conversation_changes_10_no_forgery: only pgconvo's code (or a superuser)
-- writes the change log, so a change reaches it only as it happened.
CREATE OR REPLACE TRIGGER conversation_changes_10_no_forgery
    BEFORE INSERT ON convo.conversation_changes
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_changes ENABLE ALWAYS TRIGGER conversation_changes_10_no_forgery;
