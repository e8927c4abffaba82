-- message_parts_no_forgery: the per-part rows are written only with their
-- message, by messages_split_parts from convo.messages.parts (refuse_forgery),
-- so the two copies never disagree; any other role gets CV005.
CREATE OR REPLACE TRIGGER message_parts_no_forgery
    BEFORE INSERT ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_no_forgery;
