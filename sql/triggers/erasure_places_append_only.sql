-- erasure_places_append_only: the record of erasures is itself append-only: UPDATE,
-- DELETE and TRUNCATE raise CV005 for every role but a superuser.
CREATE OR REPLACE TRIGGER erasure_places_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasure_places
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_append_only;
