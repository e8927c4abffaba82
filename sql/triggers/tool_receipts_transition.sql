-- tool_receipts_transition: a receipt goes from pending to applied or failed, once (CV006).
CREATE OR REPLACE TRIGGER tool_receipts_transition
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_receipts_transition();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_transition;
