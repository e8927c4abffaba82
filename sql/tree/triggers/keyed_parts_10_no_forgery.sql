-- keyed_parts_10_no_forgery: only pgconvo's code (or a superuser) writes the
-- keyed parts, with their messages.
CREATE OR REPLACE TRIGGER keyed_parts_10_no_forgery
    BEFORE INSERT ON convo.keyed_parts
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_10_no_forgery;
