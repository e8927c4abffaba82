-- messages_erasure_only: no row of convo.messages is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER messages_erasure_only
    BEFORE UPDATE ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_erasure_only;
