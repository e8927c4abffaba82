-- conversations_11_new_guard: a conversation inserted outside pgconvo's code
-- is what create_conversation would write; pgconvo's own inserts skip it in
-- its WHEN.
CREATE OR REPLACE TRIGGER conversations_11_new_guard
    BEFORE INSERT ON convo.conversations
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.conversations_new_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_11_new_guard;
