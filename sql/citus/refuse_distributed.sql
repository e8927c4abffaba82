-- refuse_distributed: the API function p_name, on a distributed database,
-- replaced by one that refuses with feature_not_supported (0A000) and
-- changes nothing, for what does not run there yet: the imports and
-- self_check, whose bodies read an owner's or every conversation's rows in
-- one statement of the owner role, which Citus would run over connections
-- as that role, which cannot log in. Same arguments, result and grants, so
-- that a caller learns why rather than a login error. A later migration
-- that re-creates the function is refused again at its end (route_api).
-- Idempotent.
CREATE OR REPLACE FUNCTION convo_node.refuse_distributed(p_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_api regprocedure := (SELECT p.oid FROM pg_proc p
                            WHERE p.pronamespace = 'convo'::regnamespace AND p.proname = p_name);
BEGIN
    IF v_api IS NULL THEN
        RAISE EXCEPTION 'convo.% does not exist', p_name;
    END IF;
    EXECUTE format($f$CREATE OR REPLACE FUNCTION convo.%I(%s) RETURNS %s LANGUAGE plpgsql VOLATILE SECURITY INVOKER
                      SET search_path = pg_catalog, pg_temp AS %L$f$,
                   p_name, pg_get_function_arguments(v_api), pg_get_function_result(v_api), format($b$
BEGIN
    RAISE EXCEPTION %L
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'it would read rows of many nodes as the owner role, which cannot log in',
              HINT = 'See docs/scaling.md, "What does not run on a distributed database".';
END;
$b$, format('convo.%s does not run on a distributed database', p_name)));
END;
$$;
