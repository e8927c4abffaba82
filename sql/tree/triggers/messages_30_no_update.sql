-- messages_30_no_update: outside pgconvo's code a message is never updated;
-- pgconvo's only update of one is erasure's redaction (erase_content).
CREATE OR REPLACE TRIGGER messages_30_no_update
    BEFORE UPDATE ON convo.messages
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (content changes only by erasure)');
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_30_no_update;
