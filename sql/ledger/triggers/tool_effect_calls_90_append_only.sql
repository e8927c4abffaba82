-- tool_effect_calls_90_append_only: a call's decision never changes.
CREATE OR REPLACE TRIGGER tool_effect_calls_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_calls
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_90_append_only;
