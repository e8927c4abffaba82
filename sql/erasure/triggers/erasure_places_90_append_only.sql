-- erasure_places_90_append_only: the record of erasures is append-only.
CREATE OR REPLACE TRIGGER erasure_places_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasure_places
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_90_append_only;
