-- route_view_rows: the row functions of the views orphaned_applied_effects,
-- stale_generations and stale_pending_effects on a distributed database, as routers that run as
-- their caller: one call on each node (view_rows_on_node, with a key of
-- that node: node_keys), the rows gathered here; each node keeps the
-- caller's owner's rows only, as on one server. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_view_rows()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_view    text;
    v_columns text;
    v_select  text;
    v_rows    regprocedure;
BEGIN
    FOREACH v_view IN ARRAY ARRAY['orphaned_applied_effects', 'stale_generations', 'stale_pending_effects'] LOOP
        v_rows := format('convo_private.%I()', v_view || '_rows')::regprocedure;
        PERFORM convo_node.grant_like(convo_node.delegate('convo_node.view_rows_on_node(uuid, text)', 'p_key',
                                                          'convo.conversations'), v_rows);
        -- The result columns, and a select list that casts them back: a
        -- character column (currency) comes back through jsonb as text.
        SELECT string_agg(format('%I %s', a.name, CASE WHEN a.type = 'bpchar'::regtype THEN 'text'
                                                        ELSE format_type(a.type, NULL) END), ', ' ORDER BY a.n),
               string_agg(format('x.%I%s', a.name, CASE WHEN a.type = 'bpchar'::regtype THEN '::bpchar' ELSE '' END),
                          ', ' ORDER BY a.n)
          INTO v_columns, v_select
          FROM pg_proc p,
               unnest(p.proargnames, p.proallargtypes::oid[], p.proargmodes::text[]) WITH ORDINALITY AS a (name, type, mode, n)
         WHERE p.oid = v_rows AND a.mode = 't';
        EXECUTE format($f$CREATE OR REPLACE FUNCTION %s RETURNS %s LANGUAGE plpgsql VOLATILE SECURITY INVOKER
                          SET search_path = pg_catalog, pg_temp AS %L$f$,
                       v_rows, pg_get_function_result(v_rows), format($b$
DECLARE
    v_key  uuid;
    v_part jsonb;
    v_all  jsonb := '[]';
BEGIN
    PERFORM convo_node.pass_owner();
    FOR v_key IN SELECT * FROM convo_node.node_keys() LOOP
        EXECUTE format('SELECT * FROM convo_node.view_rows_on_node_delegated(%%L::uuid, $1)', v_key)
           INTO v_part USING ARRAY[%L];
        v_all := v_all || v_part;
    END LOOP;
    RETURN QUERY SELECT %s FROM jsonb_to_recordset(v_all) AS x (%s);
END;
$b$, v_view, v_select, v_columns));
    END LOOP;
END;
$$;
