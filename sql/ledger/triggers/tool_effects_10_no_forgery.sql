-- tool_effects_10_no_forgery: only pgconvo's code (or a superuser) writes the
-- ledger.
CREATE OR REPLACE TRIGGER tool_effects_10_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_10_no_forgery;
