-- tool_receipts_notify: a receipt's filing, fill and settlement are sent to channel convo_effect (id, status).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER tool_receipts_notify
    AFTER INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_receipt();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_notify;
