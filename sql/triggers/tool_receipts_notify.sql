-- tool_receipts_notify: a receipt's filing, fill and settlement are sent to channel convo_effect (id, status).
CREATE OR REPLACE TRIGGER tool_receipts_notify
    AFTER INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW EXECUTE FUNCTION convo_private.notify_receipt();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_notify;
