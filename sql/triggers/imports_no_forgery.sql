-- imports_no_forgery: only the import functions record an import (who, when,
-- the document's digest), so a record names the role that really imported.
CREATE OR REPLACE TRIGGER imports_no_forgery
    BEFORE INSERT ON convo.imports
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_no_forgery;
