-- route_expire_receipts: expire_receipts on a distributed database, as a
-- router that runs as its caller: one call on each node
-- (expire_receipts_on_node, with a key of that node: node_keys), the
-- counts summed. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_expire_receipts()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_router regprocedure := 'convo.expire_receipts(timestamp with time zone)';
BEGIN
    PERFORM convo_node.grant_like(convo_node.delegate('convo_node.expire_receipts_on_node(uuid, timestamp with time zone)',
                                                      'p_key', 'convo.conversations'), v_router);
    CREATE OR REPLACE FUNCTION convo.expire_receipts(p_now timestamptz DEFAULT clock_timestamp())
    RETURNS int
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $body$
    DECLARE
        v_key   uuid;
        v_part  int;
        v_count int := 0;
    BEGIN
        IF p_now IS NULL THEN
            RAISE EXCEPTION 'p_now is required' USING ERRCODE = 'CV011', DETAIL = 'p_now NULL';
        END IF;
        PERFORM convo_node.pass_owner();
        FOR v_key IN SELECT * FROM convo_node.node_keys() LOOP
            EXECUTE format('SELECT * FROM convo_node.expire_receipts_on_node_delegated(%L::uuid, $1)', v_key)
               INTO v_part USING ARRAY[p_now];
            v_count := v_count + v_part;
        END LOOP;
        RETURN v_count;
    END;
    $body$;
    ALTER FUNCTION convo.expire_receipts(timestamp with time zone) OWNER TO convo_owner;
END;
$$;
