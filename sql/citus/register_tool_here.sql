-- register_tool_here: register_tool on the coordinator's copy of
-- convo.tools, as the owner role (a local write, which opens no
-- connection): the coordinator's copy is the one the others follow. It
-- answers with every version of the tool there, sealed (a keyed digest no
-- caller can compute), which register_tool_on_node copies to each
-- worker's copy: a worker's copy can hold only what the coordinator's
-- holds, so the copies never contradict each other, whatever a caller
-- calls by hand, and one missing a version gets it from the next
-- register_tool of that name. NULL where the coordinator holds no copy;
-- CV005 on a worker, whose copy only follows.
CREATE OR REPLACE FUNCTION convo_node.register_tool_here(
    p_name              text,
    p_effectful         boolean,
    p_args_schema       jsonb,
    p_idempotency_scope text,
    p_deadline          interval,
    p_amount_arg        text,
    p_currency_arg      text)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET citus.enable_manual_changes_to_shards = on
AS $$
DECLARE
    v_copy     text := (SELECT s FROM convo_node.local_shards('convo.tools') s LIMIT 1);
    v_versions jsonb;
BEGIN
    IF (SELECT g.groupid FROM pg_dist_local_group g) <> 0 THEN
        RAISE EXCEPTION 'register tools on the coordinator: this node is a worker'
            USING ERRCODE = 'CV005', DETAIL = format('tool %s', p_name);
    END IF;
    IF v_copy IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM convo_private.register_tool_in(v_copy, p_name, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
                                           p_amount_arg, p_currency_arg);
    EXECUTE format('SELECT jsonb_agg(to_jsonb(t) ORDER BY t.version) FROM %s t WHERE t.name = $1', v_copy)
       INTO v_versions USING p_name;
    RETURN jsonb_build_object('name', p_name, 'versions', v_versions,
                              'seal', convo_node.tool_versions_seal(p_name, v_versions));
END;
$$;
