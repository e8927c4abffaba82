-- messages_split_parts: a message's parts become message_parts rows in the
-- statement that inserts the message.
CREATE OR REPLACE TRIGGER messages_split_parts
    AFTER INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.messages_split_parts();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_split_parts;
