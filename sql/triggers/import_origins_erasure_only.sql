-- import_origins_erasure_only: an origin record changes only by erasure
-- (exactly its redaction, in a transaction that recorded it).
CREATE OR REPLACE TRIGGER import_origins_erasure_only
    BEFORE UPDATE ON convo.import_origins
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_erasure_only;
