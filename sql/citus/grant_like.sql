-- grant_like: EXECUTE on p_function for exactly the roles documented for
-- p_like (documented_grants), and for nobody else: a router's delegated
-- function is callable by whoever may call the router, which runs as its
-- caller.
CREATE OR REPLACE FUNCTION convo_node.grant_like(p_function regprocedure, p_like regprocedure)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role text;
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, convo_app, convo_reader, convo_admin', p_function);
    FOR v_role IN SELECT g.grantee FROM convo_private.documented_grants() g
                   WHERE g.object_kind = 'FUNCTION' AND g.object_name = p_like::text AND g.privilege = 'EXECUTE' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', p_function, v_role);
    END LOOP;
END;
$$;
