-- tool_effect_events_append_only: the effect event log is append-only (CV005).
CREATE OR REPLACE TRIGGER tool_effect_events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_append_only;
