-- tool_receipts_90_no_delete: receipts are never deleted, by any role.
CREATE OR REPLACE TRIGGER tool_receipts_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_receipts
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_90_no_delete;
