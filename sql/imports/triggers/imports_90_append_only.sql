-- imports_90_append_only: the record of imports is never deleted.
CREATE OR REPLACE TRIGGER imports_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.imports
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_90_append_only;
