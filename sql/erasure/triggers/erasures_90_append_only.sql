-- erasures_90_append_only: the record of erasures is append-only.
CREATE OR REPLACE TRIGGER erasures_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasures
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_90_append_only;
