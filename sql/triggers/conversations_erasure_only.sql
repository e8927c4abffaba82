-- conversations_erasure_only: a conversation's metadata changes only by an
-- erasure (refuse_all_but_erasure), for every role. UPDATE OF metadata, so
-- that moving the head, the hot write, never pays for the comparison.
CREATE OR REPLACE TRIGGER conversations_erasure_only
    BEFORE UPDATE OF metadata ON convo.conversations
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_erasure_only;
