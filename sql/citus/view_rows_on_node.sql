-- view_rows_on_node: the rows of one of the views' row functions
-- (p_view: orphaned_applied_effects, stale_generations,
-- stale_pending_effects) on this node, as one jsonb array: its _in function
-- run on each group of the node's shards (local_shard_groups) of the
-- tables it reads, in its arguments' order. p_key only names the node
-- (node_keys).
CREATE OR REPLACE FUNCTION convo_node.view_rows_on_node(p_key uuid, p_view text)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tables regclass[] := CASE p_view
        WHEN 'orphaned_applied_effects' THEN ARRAY['convo.tool_effects', 'convo.conversations',
                                                   'convo.tool_effect_calls', 'convo.messages']::regclass[]
        WHEN 'stale_generations' THEN ARRAY['convo.generations', 'convo.conversations']::regclass[]
        WHEN 'stale_pending_effects' THEN ARRAY['convo.tool_effects', 'convo.conversations']::regclass[] END;
    v_shards text[];
    v_part   jsonb;
    v_rows   jsonb := '[]';
BEGIN
    IF v_tables IS NULL THEN
        RAISE EXCEPTION 'no view %', p_view USING ERRCODE = 'CV011';
    END IF;
    FOR v_shards IN SELECT * FROM convo_node.local_shard_groups(v_tables) LOOP
        EXECUTE format('SELECT coalesce(jsonb_agg(to_jsonb(r)), ''[]'') FROM convo_private.%I(%s) AS r', p_view || '_in',
                       (SELECT string_agg(quote_literal(x), ', ') FROM unnest(v_shards) AS x))
           INTO v_part;
        v_rows := v_rows || v_part;
    END LOOP;
    RETURN v_rows;
END;
$$;
