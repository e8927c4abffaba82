-- tool_effects_no_delete: an effect is never deleted (CV005); abandoning a branch is not a transition.
CREATE OR REPLACE TRIGGER tool_effects_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_effects
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_no_delete;
