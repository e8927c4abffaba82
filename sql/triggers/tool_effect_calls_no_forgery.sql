-- tool_effect_calls_no_forgery: rows of convo.tool_effect_calls are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effect_calls_no_forgery
    BEFORE INSERT ON convo.tool_effect_calls
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_no_forgery;
