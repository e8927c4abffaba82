-- route: the API function p_name, on a distributed database, as a router
-- that runs as its caller: it refuses a NULL key (CV011, as the body does,
-- before anything reaches Citus), passes the caller's owner on with SET
-- LOCAL (which Citus sends to the node, where set_config is not), and calls
-- the body's delegated function (delegate) with the key as a constant,
-- which is what Citus hands to one node; a set-returning body's rows come
-- back as one jsonb array. The body, the API function as its
-- migration made it, moves to convo_node under its own name; a body that a
-- later migration re-created in convo replaces the one there. With p_key
-- NULL the key is the caller's owner (convo.owner_id), which must be set:
-- the receipts named by id alone live on their owner's node. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route(p_name text, p_key text, p_colocate regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_api     regprocedure := (SELECT p.oid FROM pg_proc p
                                WHERE p.pronamespace = 'convo'::regnamespace AND p.proname = p_name);
    v_body    regprocedure;
    v_router  regprocedure;
    v_proc    pg_proc;
    v_shim    regprocedure;
    v_args    text[] := '{}';
    v_using   text[] := '{}';
    v_key     text := coalesce(quote_ident(p_key), 'v_owner');
    v_check   text;
    v_columns text;
    v_result  text;
    v_call    text;
    v_name    text;
    v_type    text;
    v_n       int := 0;
BEGIN
    IF v_api IS NULL THEN
        RAISE EXCEPTION 'convo.% does not exist', p_name;
    END IF;
    IF (SELECT p.prosecdef FROM pg_proc p WHERE p.oid = v_api) THEN
        -- The API function is a body (new, or re-created by a migration).
        v_body := to_regprocedure(format('convo_node.%I(%s)', p_name, oidvectortypes(
                      (SELECT p.proargtypes FROM pg_proc p WHERE p.oid = v_api))));
        IF v_body IS NOT NULL THEN
            EXECUTE format('DROP FUNCTION %s', v_body);
        END IF;
        EXECUTE format('ALTER FUNCTION %s SET SCHEMA convo_node', v_api);
        v_body := v_api;
    ELSE
        v_body := format('convo_node.%I(%s)', p_name,
                         oidvectortypes((SELECT p.proargtypes FROM pg_proc p WHERE p.oid = v_api)))::regprocedure;
    END IF;
    v_shim := convo_node.delegate(v_body, p_key, p_colocate);

    SELECT * INTO v_proc FROM pg_proc p WHERE p.oid = v_body;
    v_result := pg_get_function_result(v_body);
    -- A set-returning body's result columns, for its rows' way back.
    SELECT string_agg(format('%I %s', a.name, format_type(a.type, NULL)), ', ' ORDER BY a.n) INTO v_columns
      FROM unnest(v_proc.proargnames, v_proc.proallargtypes::oid[], v_proc.proargmodes::text[]) WITH ORDINALITY AS a (name, type, mode, n)
     WHERE a.mode IN ('o', 't', 'b');
    IF p_key IS NULL THEN
        v_args := ARRAY['%L::text'];
    END IF;
    FOR v_name, v_type IN
        SELECT a.name, format_type(a.type, NULL)
          FROM unnest(v_proc.proargnames[1:v_proc.pronargs], v_proc.proargtypes::oid[]) WITH ORDINALITY AS a (name, type, n)
         ORDER BY a.n LOOP
        IF v_name = p_key THEN
            v_args := v_args || format('%%L::%s', v_type);
        ELSE
            v_n := v_n + 1;
            v_args := v_args || ('$' || v_n);
            v_using := v_using || format('ARRAY[%I]::%s[]', v_name, v_type);
        END IF;
    END LOOP;
    v_call := format('EXECUTE format(%L, %s)%s', format('SELECT * FROM %s(%s)', v_shim::oid::regproc, array_to_string(v_args, ', ')),
                     v_key, CASE WHEN v_n > 0 THEN ' USING ' || array_to_string(v_using, ', ') ELSE '' END);
    v_check := CASE WHEN p_key IS NOT NULL THEN format(
                   $c$IF %I IS NULL THEN
        RAISE EXCEPTION '%s is required' USING ERRCODE = 'CV011', DETAIL = 'key NULL';
    END IF;$c$, p_key, p_key)
               ELSE
                   $c$IF v_owner IS NULL THEN
        RAISE EXCEPTION 'no receipt of an unnamed owner exists here' USING ERRCODE = 'CV002', DETAIL = 'convo.owner_id unset',
            HINT = 'On a distributed database, set convo.owner_id to the receipt''s owner first (SET LOCAL).';
    END IF;$c$ END;
    EXECUTE format(
        $f$CREATE OR REPLACE FUNCTION convo.%I(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L$f$,
        p_name, pg_get_function_arguments(v_body), v_result,
        format($b$
DECLARE
    v_result %s;
    v_rows   jsonb;
    v_owner  text := nullif(current_setting('convo.owner_id', true), '');
BEGIN
    %s
    PERFORM convo_node.pass_owner();
    %s;
END;
$b$, CASE WHEN v_proc.proretset OR v_result = 'void' THEN 'boolean' ELSE v_result END, v_check,
     CASE WHEN v_proc.proretset THEN v_call || ' INTO v_rows;' || E'\n    RETURN QUERY SELECT * FROM '
              || CASE WHEN v_columns IS NULL THEN format('jsonb_array_elements_text(v_rows) AS x (value)')
                      ELSE format('jsonb_to_recordset(v_rows) AS x (%s)', v_columns) END
          WHEN v_result = 'void' THEN v_call
          ELSE v_call || ' INTO v_result;' || E'\n    RETURN v_result' END));
    v_router := format('convo.%I(%s)', p_name, oidvectortypes(v_proc.proargtypes))::regprocedure;
    EXECUTE format('ALTER FUNCTION %s OWNER TO convo_owner', v_router);
    EXECUTE format('COMMENT ON FUNCTION %s IS %L', v_router, obj_description(v_body, 'pg_proc'));
    -- Whoever may call the router may call what it calls.
    PERFORM convo_node.grant_like(v_shim, v_router);
END;
$$;
