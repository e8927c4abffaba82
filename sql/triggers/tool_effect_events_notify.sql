-- tool_effect_events_notify: every effect transition is sent to channel convo_effect (ids, seq, states).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER tool_effect_events_notify
    AFTER INSERT ON convo.tool_effect_events
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_effect_event();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_notify;
