-- tool_effects_log: every transition of an effect is appended to tool_effect_events.
CREATE OR REPLACE TRIGGER tool_effects_log
    AFTER INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_effects_log();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_log;
