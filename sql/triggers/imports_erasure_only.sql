-- imports_erasure_only: an import's record changes only by erasure (its
-- source key and digest emptied, in a transaction that recorded it).
CREATE OR REPLACE TRIGGER imports_erasure_only
    BEFORE UPDATE ON convo.imports
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_erasure_only;
