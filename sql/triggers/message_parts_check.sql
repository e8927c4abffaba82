-- message_parts_check: each part is checked (shape, role, tool pairing,
-- size) on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER message_parts_check
    BEFORE INSERT ON convo.message_parts
    FOR EACH ROW EXECUTE FUNCTION convo_private.message_parts_check();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_check;
