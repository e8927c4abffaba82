-- expire_receipts_on_node: expire_receipts on this node: its sweep
-- (expire_receipts_in) over each of the node's shards of
-- convo.tool_receipts, written as plain tables. p_key only names the node
-- (node_keys).
CREATE OR REPLACE FUNCTION convo_node.expire_receipts_on_node(p_key uuid, p_now timestamptz)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET citus.enable_manual_changes_to_shards = on
AS $$
DECLARE
    v_shard text;
    v_count int := 0;
BEGIN
    FOR v_shard IN SELECT * FROM convo_node.local_shards('convo.tool_receipts') LOOP
        v_count := v_count + convo_private.expire_receipts_in(v_shard, p_now);
    END LOOP;
    RETURN v_count;
END;
$$;
