-- tool_effects_30_log_direct: a transition made outside pgconvo's code gets
-- its event, by the caller; pgconvo's own transitions log themselves.
CREATE OR REPLACE TRIGGER tool_effects_30_log_direct
    AFTER INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_effects_log_direct();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_30_log_direct;
