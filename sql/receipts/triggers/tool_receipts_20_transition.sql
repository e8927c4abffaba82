-- tool_receipts_20_transition: outside pgconvo's code a receipt is filed
-- pending and ends once, CV006 otherwise.
CREATE OR REPLACE TRIGGER tool_receipts_20_transition
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_receipts_transition();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_20_transition;
