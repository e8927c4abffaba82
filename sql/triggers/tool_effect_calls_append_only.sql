-- tool_effect_calls_append_only: a tool call's ledger decision is written once (CV005).
CREATE OR REPLACE TRIGGER tool_effect_calls_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_calls
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_append_only;
