-- tool_effect_events_10_no_forgery: only pgconvo's code (or a superuser)
-- writes the event log.
CREATE OR REPLACE TRIGGER tool_effect_events_10_no_forgery
    BEFORE INSERT ON convo.tool_effect_events
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_10_no_forgery;
