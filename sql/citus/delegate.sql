-- delegate: the function Citus hands whole to the node that holds a key:
-- convo_node.<body>_delegated(key, each other argument as a one-element
-- array), STRICT, running as the owner role, calling the body there.
-- Distributed by the key with force_delegation, colocated with the table
-- the key names rows of, so its statements run on that node and never open
-- a connection as the owner (who cannot log in). STRICT because a NULL key
-- must never reach Citus's planner (it crashes the server on one):
-- PostgreSQL folds a STRICT call with a NULL argument away before Citus
-- looks, and the arrays make every other argument, NULL or not, a value.
-- It returns one value, never a set (PostgreSQL folds no call of a
-- set-returning function): a set-returning body's rows come back as one
-- jsonb array, which the router turns into rows again.
-- With p_key NULL the key is the caller's owner, a first argument
-- p_owner_id of this function that the body does not take (the receipts
-- named by id alone, which live on their owner's node). Whoever may call
-- the body through the API may call this (the API's routers run as their
-- caller); the body itself is the owner's alone.
CREATE OR REPLACE FUNCTION convo_node.delegate(p_body regprocedure, p_key text, p_colocate regclass)
RETURNS regprocedure
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_proc   pg_proc;
    v_params text[] := '{}';
    v_types  text[] := '{}';
    v_args   text[] := '{}';
    v_name   text;
    v_type   text;
    v_shim   regprocedure;
BEGIN
    SELECT * INTO v_proc FROM pg_proc p WHERE p.oid = p_body;
    IF p_key IS NULL THEN
        v_params := ARRAY['p_owner_id text'];
        v_types := ARRAY['text'];
    END IF;
    FOR v_name, v_type IN
        SELECT a.name, format_type(a.type, NULL)
          FROM unnest(v_proc.proargnames[1:v_proc.pronargs], v_proc.proargtypes::oid[]) WITH ORDINALITY AS a (name, type, n)
         ORDER BY a.n LOOP
        IF v_name IS DISTINCT FROM p_key THEN
            v_type := v_type || '[]';
        END IF;
        v_params := v_params || format('%I %s', v_name, v_type);
        v_types := v_types || v_type;
        v_args := v_args || CASE WHEN v_name = p_key THEN quote_ident(v_name) ELSE format('%I[1]', v_name) END;
    END LOOP;
    EXECUTE format('CREATE OR REPLACE FUNCTION convo_node.%I(%s) RETURNS %s LANGUAGE sql STRICT SECURITY DEFINER '
                   'SET search_path = pg_catalog, pg_temp AS %L',
                   v_proc.proname || '_delegated', array_to_string(v_params, ', '),
                   CASE WHEN v_proc.proretset THEN 'jsonb' ELSE pg_get_function_result(p_body) END,
                   format(CASE WHEN v_proc.proretset THEN 'SELECT coalesce(jsonb_agg(to_jsonb(r)), ''[]'') FROM %s.%I(%s) AS r'
                               ELSE 'SELECT * FROM %s.%I(%s)' END,
                          v_proc.pronamespace::regnamespace, v_proc.proname, array_to_string(v_args, ', ')));
    v_shim := format('convo_node.%I(%s)', v_proc.proname || '_delegated', array_to_string(v_types, ', '))::regprocedure;
    EXECUTE format('ALTER FUNCTION %s OWNER TO convo_owner', v_shim);
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_shim);
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, convo_app, convo_reader, convo_admin', p_body);
    PERFORM create_distributed_function(v_shim, coalesce(p_key, 'p_owner_id'), colocate_with => p_colocate::text,
                                        force_delegation => true);
    RETURN v_shim;
END;
$$;
