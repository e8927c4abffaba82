-- tool_effects_transition: every change of an effect is a transition of its state machine (CV006).
CREATE OR REPLACE TRIGGER tool_effects_transition
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_effects_transition();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_transition;
