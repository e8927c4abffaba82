-- owner_erasures_90_append_only: the record of erasures is append-only.
CREATE OR REPLACE TRIGGER owner_erasures_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.owner_erasures
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.owner_erasures ENABLE ALWAYS TRIGGER owner_erasures_90_append_only;
