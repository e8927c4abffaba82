-- imports_10_no_forgery: only the import functions (or a superuser) record
-- an import (who, when, the document's digest), so a record names the role
-- that really imported.
CREATE OR REPLACE TRIGGER imports_10_no_forgery
    BEFORE INSERT ON convo.imports
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_10_no_forgery;
