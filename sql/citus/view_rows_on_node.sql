-- view_rows_on_node: the rows of one of the views' row functions
-- (p_view: stale_generations, stale_pending_effects) on this node, as one
-- jsonb array: its _in function run on each group of the node's shards
-- (local_shard_groups). p_key only names the node (node_keys).
CREATE OR REPLACE FUNCTION convo_node.view_rows_on_node(p_key uuid, p_view text)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_table  regclass := CASE p_view WHEN 'stale_generations' THEN 'convo.generations'::regclass
                                     WHEN 'stale_pending_effects' THEN 'convo.tool_effects'::regclass END;
    v_shards text[];
    v_part   jsonb;
    v_rows   jsonb := '[]';
BEGIN
    IF v_table IS NULL THEN
        RAISE EXCEPTION 'no view %', p_view USING ERRCODE = 'CV011';
    END IF;
    FOR v_shards IN SELECT * FROM convo_node.local_shard_groups(ARRAY[v_table, 'convo.conversations'::regclass]) LOOP
        EXECUTE format('SELECT coalesce(jsonb_agg(to_jsonb(r)), ''[]'') FROM convo_private.%I($1, $2) AS r', p_view || '_in')
           INTO v_part USING v_shards[1], v_shards[2];
        v_rows := v_rows || v_part;
    END LOOP;
    RETURN v_rows;
END;
$$;
