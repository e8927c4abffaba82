-- imports_30_no_update: outside pgconvo's code an import's record is never
-- updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER imports_30_no_update
    BEFORE UPDATE ON convo.imports
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (its source key and digest change only by erasure)');
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_30_no_update;
