-- import_origins_30_no_update: outside pgconvo's code an origin record is
-- never updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER import_origins_30_no_update
    BEFORE UPDATE ON convo.import_origins
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (a source node changes only by erasure)');
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_30_no_update;
