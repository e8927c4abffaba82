-- register_tool_on_node: the coordinator's versions of one tool
-- (register_tool_here's answer, sealed) copied into this node's copy of
-- convo.tools, row for row, each copy written by a call on its own node
-- in the caller's transaction where Citus would write every copy over
-- connections as the owner role. It refuses rows without the seal (CV005)
-- and a copy that holds a version the coordinator's does not, or holds
-- otherwise (the copies differ); it answers the latest version here. NULL
-- where this node holds no copy. p_key only names the node (node_keys).
CREATE OR REPLACE FUNCTION convo_node.register_tool_on_node(p_key uuid, p_versions jsonb)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET citus.enable_manual_changes_to_shards = on
AS $$
DECLARE
    v_copy    text := (SELECT s FROM convo_node.local_shards('convo.tools') s LIMIT 1);
    v_name    text := p_versions ->> 'name';
    v_rows    jsonb := p_versions -> 'versions';
    v_differs text;
    v_latest  int;
BEGIN
    IF (SELECT g.groupid FROM pg_dist_local_group g) = 0 THEN
        RAISE EXCEPTION 'the coordinator''s copy of convo.tools is written by register_tool_here, not copied'
            USING ERRCODE = 'CV005', DETAIL = format('tool %s', v_name);
    END IF;
    IF v_copy IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_versions ->> 'seal' IS DISTINCT FROM convo_node.tool_versions_seal(v_name, v_rows) THEN
        RAISE EXCEPTION 'these versions of tool % are not the coordinator''s: register tools with register_tool', v_name
            USING ERRCODE = 'CV005', DETAIL = format('tool %s', v_name);
    END IF;
    -- Lock the name as register_tool_in does, so that two copies of the
    -- same versions wait for each other.
    PERFORM pg_advisory_xact_lock(hashtext('convo.tools'), hashtext(v_name));
    EXECUTE format('SELECT string_agg(t.version::text, '', '' ORDER BY t.version)
                      FROM %s t LEFT JOIN jsonb_populate_recordset(NULL::convo.tools, $2) x ON x.version = t.version
                     WHERE t.name = $1 AND (x.name IS DISTINCT FROM t.name OR to_jsonb(x) <> to_jsonb(t))', v_copy)
       INTO v_differs USING v_name, v_rows;
    IF v_differs IS NOT NULL THEN
        RAISE EXCEPTION 'the copies of convo.tools differ: version % of tool % here is not the coordinator''s', v_differs, v_name
            USING ERRCODE = 'CV005', DETAIL = format('tool %s, versions %s', v_name, v_differs);
    END IF;
    EXECUTE format('INSERT INTO %s (name, version, effectful, args_schema, idempotency_scope, deadline, amount_arg,
                                    currency_arg, registered_at, registered_by)
                    SELECT x.name, x.version, x.effectful, x.args_schema, x.idempotency_scope, x.deadline, x.amount_arg,
                           x.currency_arg, x.registered_at, x.registered_by
                      FROM jsonb_populate_recordset(NULL::convo.tools, $1) x
                     ORDER BY x.version
                    ON CONFLICT (name, version) DO NOTHING', v_copy)
      USING v_rows;
    EXECUTE format('SELECT max(t.version) FROM %s t WHERE t.name = $1', v_copy) INTO v_latest USING v_name;
    RETURN v_latest;
END;
$$;
