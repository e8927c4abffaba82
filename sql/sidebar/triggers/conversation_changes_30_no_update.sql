-- conversation_changes_30_no_update: outside pgconvo's code a change row is
-- never updated; pgconvo's only update of one is erasure's redaction of a title.
CREATE OR REPLACE TRIGGER conversation_changes_30_no_update
    BEFORE UPDATE ON convo.conversation_changes
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (titles change only by erasure)');
ALTER TABLE convo.conversation_changes ENABLE ALWAYS TRIGGER conversation_changes_30_no_update;
