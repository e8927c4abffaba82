-- message_parts_record_tool_call: a tool call's ledger decision is written
-- in the statement that stores its tool_use part, before any request leaves.
CREATE OR REPLACE TRIGGER message_parts_record_tool_call
    AFTER INSERT ON convo.message_parts
    FOR EACH ROW
    WHEN (NEW.type = 'tool_use')
    EXECUTE FUNCTION convo_private.record_tool_call();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_record_tool_call;
