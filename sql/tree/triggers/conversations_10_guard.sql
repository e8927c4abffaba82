-- conversations_10_guard: id, owner and creation time never change, a head
-- once set is never unset, and outside pgconvo's code metadata never changes
-- (erasure is pgconvo's). pgconvo's own head moves skip it in its WHEN.
CREATE OR REPLACE TRIGGER conversations_10_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.created_at IS DISTINCT FROM NEW.created_at
          OR (OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL) OR current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.conversations_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_10_guard;
