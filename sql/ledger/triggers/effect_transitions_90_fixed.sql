-- effect_transitions_90_fixed: the effect state machine is data, and fixed.
CREATE OR REPLACE TRIGGER effect_transitions_90_fixed
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON convo.effect_transitions
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change('the fixed effect state machine');
ALTER TABLE convo.effect_transitions ENABLE ALWAYS TRIGGER effect_transitions_90_fixed;
