-- message_parts_10_refuse: convo.message_parts is a view of the parts of the
-- messages (their array, one row a part): it is never written.
CREATE OR REPLACE TRIGGER message_parts_10_refuse
    INSTEAD OF INSERT OR UPDATE OR DELETE ON convo.message_parts
    FOR EACH ROW
    EXECUTE FUNCTION convo_private.refuse_change('a view of the messages'' parts (append-only)');
