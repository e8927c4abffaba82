-- erasures_append_only: the record of erasures is itself append-only: UPDATE,
-- DELETE and TRUNCATE raise CV005 for every role but a superuser.
CREATE OR REPLACE TRIGGER erasures_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasures
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_append_only;
