-- tool_effect_events_90_append_only: events are never deleted, by any role.
CREATE OR REPLACE TRIGGER tool_effect_events_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_90_append_only;
