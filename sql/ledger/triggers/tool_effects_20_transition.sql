-- tool_effects_20_transition: outside pgconvo's code an effect changes only
-- by a transition of the state machine (effect_transitions), CV006 otherwise.
CREATE OR REPLACE TRIGGER tool_effects_20_transition
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_effects_transition();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_20_transition;
