-- tool_effect_events_notify: every effect transition is sent to channel convo_effect (ids, seq, states).
CREATE OR REPLACE TRIGGER tool_effect_events_notify
    AFTER INSERT ON convo.tool_effect_events
    FOR EACH ROW EXECUTE FUNCTION convo_private.notify_effect_event();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_notify;
