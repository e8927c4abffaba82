-- tool_effects_no_forgery: rows of convo.tool_effects are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effects_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_no_forgery;
