-- generations_transition: a generation starts streaming and ends once (CV006).
CREATE OR REPLACE TRIGGER generations_transition
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH ROW EXECUTE FUNCTION convo_private.generations_transition();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_transition;
