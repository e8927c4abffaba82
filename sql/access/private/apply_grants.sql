-- apply_grants: makes the catalog grant exactly documented_grants: revokes
-- every other privilege (PUBLIC's default EXECUTE included), then grants
-- what is missing. Run by each migration that adds or changes an object,
-- after hand_over_objects has given the owner role what it created;
-- idempotent.
CREATE OR REPLACE FUNCTION convo_private.apply_grants()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT * FROM convo_private.granted_privileges()
             EXCEPT SELECT * FROM convo_private.documented_grants() LOOP
        EXECUTE format('REVOKE %s ON %s %s FROM %s', v.privilege, v.object_kind, v.object_name,
                       CASE v.grantee WHEN 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(v.grantee) END);
    END LOOP;
    FOR v IN SELECT * FROM convo_private.documented_grants()
             EXCEPT SELECT * FROM convo_private.granted_privileges() LOOP
        EXECUTE format('GRANT %s ON %s %s TO %I', v.privilege, v.object_kind, v.object_name, v.grantee);
    END LOOP;
END;
$$;
