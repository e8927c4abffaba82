-- message_parts_erasure_only: no row of convo.message_parts is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER message_parts_erasure_only
    BEFORE UPDATE ON convo.message_parts
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_erasure_only;
