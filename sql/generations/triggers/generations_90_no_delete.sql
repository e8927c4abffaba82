-- generations_90_no_delete: generations are never deleted, by any role.
CREATE OR REPLACE TRIGGER generations_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.generations
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_90_no_delete;
