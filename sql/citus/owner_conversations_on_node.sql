-- owner_conversations_on_node: the ids of p_owner_id's conversations
-- stored on this node (its shards of convo.conversations); p_key only names
-- the node (node_keys). erase_owner's list, gathered a node at a time.
CREATE OR REPLACE FUNCTION convo_node.owner_conversations_on_node(p_key uuid, p_owner_id text)
RETURNS SETOF uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shard text;
BEGIN
    FOR v_shard IN SELECT * FROM convo_node.local_shards('convo.conversations') LOOP
        RETURN QUERY EXECUTE format('SELECT c.id FROM %s c WHERE c.owner_id = $1', v_shard) USING p_owner_id;
    END LOOP;
END;
$$;
