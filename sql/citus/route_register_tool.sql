-- route_register_tool: register_tool on a distributed database, as a
-- router that runs as its caller: every node's copy of convo.tools written
-- by a call on that node (register_tool_on_node), the coordinator's here
-- (register_tool_here), in the caller's transaction; each copy numbers the
-- version from the same rows, and copies that answer differently are an
-- error. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_register_tool()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_router regprocedure := 'convo.register_tool(text, boolean, jsonb, text, interval, text, text)';
BEGIN
    PERFORM convo_node.grant_like(convo_node.delegate(
        'convo_node.register_tool_on_node(uuid, text, boolean, jsonb, text, interval, text, text)',
        'p_key', 'convo.conversations'), v_router);
    PERFORM convo_node.grant_like('convo_node.register_tool_here(text, boolean, jsonb, text, interval, text, text)', v_router);
    CREATE OR REPLACE FUNCTION convo.register_tool(
        p_name              text,
        p_effectful         boolean,
        p_args_schema       jsonb,
        p_idempotency_scope text DEFAULT 'tool_call',
        p_deadline          interval DEFAULT '20 seconds',
        p_amount_arg        text DEFAULT NULL,
        p_currency_arg      text DEFAULT NULL)
    RETURNS int
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $body$
    DECLARE
        v_key      uuid;
        v_version  int;
        v_versions int[] := '{}';
        v_nodes    int := 0;
    BEGIN
        v_version := convo_node.register_tool_here(p_name, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
                                                   p_amount_arg, p_currency_arg);
        IF v_version IS NOT NULL THEN
            v_versions := v_versions || v_version;
        END IF;
        FOR v_key IN SELECT * FROM convo_node.node_keys() LOOP
            EXECUTE format('SELECT * FROM convo_node.register_tool_on_node_delegated(%L::uuid, $1, $2, $3, $4, $5, $6, $7)', v_key)
               INTO v_version
              USING ARRAY[p_name], ARRAY[p_effectful], ARRAY[p_args_schema], ARRAY[p_idempotency_scope], ARRAY[p_deadline],
                    ARRAY[p_amount_arg], ARRAY[p_currency_arg];
            v_nodes := v_nodes + 1;
            IF v_version IS NOT NULL THEN
                v_versions := v_versions || v_version;
            END IF;
        END LOOP;
        IF cardinality(v_versions) <> (SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
                                        WHERE s.logicalrelid = 'convo.tools'::regclass)
           OR (SELECT count(DISTINCT v) FROM unnest(v_versions) AS v) <> 1 THEN
            RAISE EXCEPTION 'the copies of convo.tools on the nodes answer differently: %', v_versions
                USING DETAIL = format('tool %s', p_name);
        END IF;
        RETURN v_versions[1];
    END;
    $body$;
    ALTER FUNCTION convo.register_tool(text, boolean, jsonb, text, interval, text, text) OWNER TO convo_owner;
END;
$$;
