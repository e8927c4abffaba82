-- tool_effect_events_30_no_update: outside pgconvo's code an event is never
-- updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER tool_effect_events_30_no_update
    BEFORE UPDATE ON convo.tool_effect_events
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (evidence changes only by erasure)');
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_30_no_update;
