-- generations_20_transition: outside pgconvo's code a generation starts
-- streaming and ends once, and its identity never changes.
CREATE OR REPLACE TRIGGER generations_20_transition
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.generations_transition();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_20_transition;
