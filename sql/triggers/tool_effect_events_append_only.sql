-- tool_effect_events_append_only: rows of convo.tool_effect_events are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is tool_effect_events_erasure_only's.
CREATE OR REPLACE TRIGGER tool_effect_events_append_only
    BEFORE DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_append_only;
