-- tool_effect_events_erasure_only: no row of convo.tool_effect_events is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER tool_effect_events_erasure_only
    BEFORE UPDATE ON convo.tool_effect_events
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_erasure_only;
