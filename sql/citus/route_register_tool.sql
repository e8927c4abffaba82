-- route_register_tool: register_tool on a distributed database, as a
-- router that runs as its caller, in the caller's transaction: the
-- coordinator's copy of convo.tools written first (register_tool_here),
-- then its versions of the tool copied into every worker's copy by a call
-- on that worker (register_tool_on_node), so that a copy that missed a
-- version gets it here. Each copy must then hold the same latest version.
-- Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_register_tool()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_router regprocedure := 'convo.register_tool(text, boolean, jsonb, text, interval, text, text)';
BEGIN
    PERFORM convo_node.grant_like(convo_node.delegate(
        'convo_node.register_tool_on_node(uuid, jsonb)',
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
        v_versions jsonb;
        v_latest   int;
        v_version  int;
        v_copies   int := 1;
    BEGIN
        v_versions := convo_node.register_tool_here(p_name, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
                                                    p_amount_arg, p_currency_arg);
        IF v_versions IS NULL THEN
            RAISE EXCEPTION 'the coordinator holds no copy of convo.tools: add it to the cluster (citus_set_coordinator_host)'
                USING DETAIL = format('tool %s', p_name);
        END IF;
        v_latest := (v_versions -> 'versions' -> -1 ->> 'version')::int;
        FOR v_key IN SELECT * FROM convo_node.node_keys() LOOP
            EXECUTE format('SELECT * FROM convo_node.register_tool_on_node_delegated(%L::uuid, $1)', v_key)
               INTO v_version
              USING ARRAY[v_versions];
            IF v_version IS NOT NULL THEN
                v_copies := v_copies + 1;
                IF v_version <> v_latest THEN
                    RAISE EXCEPTION 'the copies of convo.tools differ: version % of tool % on a worker, % on the coordinator',
                            v_version, p_name, v_latest
                        USING DETAIL = format('tool %s', p_name);
                END IF;
            END IF;
        END LOOP;
        IF v_copies <> (SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
                         WHERE s.logicalrelid = 'convo.tools'::regclass) THEN
            RAISE EXCEPTION 'convo.tools has % copies, and % of them were written',
                    (SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
                      WHERE s.logicalrelid = 'convo.tools'::regclass), v_copies
                USING DETAIL = format('tool %s', p_name);
        END IF;
        RETURN v_latest;
    END;
    $body$;
    ALTER FUNCTION convo.register_tool(text, boolean, jsonb, text, interval, text, text) OWNER TO convo_owner;
END;
$$;
