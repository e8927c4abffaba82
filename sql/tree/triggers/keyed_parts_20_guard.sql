-- keyed_parts_20_guard: a keyed part written outside pgconvo's code must be
-- its message's part at that ordinal (keyed_parts_guard).
CREATE OR REPLACE TRIGGER keyed_parts_20_guard
    BEFORE INSERT ON convo.keyed_parts
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.keyed_parts_guard();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_20_guard;
