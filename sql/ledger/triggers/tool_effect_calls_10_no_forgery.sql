-- tool_effect_calls_10_no_forgery: only pgconvo's code (or a superuser) links
-- a call to its decision.
CREATE OR REPLACE TRIGGER tool_effect_calls_10_no_forgery
    BEFORE INSERT ON convo.tool_effect_calls
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_10_no_forgery;
