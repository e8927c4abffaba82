-- conversations_guard: id, owner and creation time never change, and a head
-- once set is never unset.
CREATE OR REPLACE TRIGGER conversations_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW EXECUTE FUNCTION convo_private.conversations_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_guard;
