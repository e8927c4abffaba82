-- messages_20_guard: a message inserted outside pgconvo's code must be placed
-- as the tree places it, with well-formed parts (messages_guard); pgconvo's
-- own writes (write_messages) skip it in its WHEN.
CREATE OR REPLACE TRIGGER messages_20_guard
    BEFORE INSERT ON convo.messages
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.messages_guard();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_20_guard;
