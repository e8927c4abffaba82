-- generations_no_delete: generations are records of work done; never deleted (CV005).
CREATE OR REPLACE TRIGGER generations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.generations
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_no_delete;
