-- tool_effects_90_no_delete: effects are never deleted, by any role.
CREATE OR REPLACE TRIGGER tool_effects_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_effects
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_90_no_delete;
