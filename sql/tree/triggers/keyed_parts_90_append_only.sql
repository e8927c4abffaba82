-- keyed_parts_90_append_only: a keyed part holds ids only, which erasure
-- keeps: it is never updated or deleted, by any role.
CREATE OR REPLACE TRIGGER keyed_parts_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.keyed_parts
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_90_append_only;
