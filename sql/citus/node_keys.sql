-- node_keys: one key for each node that holds shards of
-- convo.conversations (every worker), found by trying keys in a fixed order
-- (md5 of 1, 2, ...) until every node has one: what a router passes to a
-- delegated function to run it once on each node. Found afresh at each call, so a shard moved by the rebalancer is
-- followed. It runs as the owner role, which alone may ask Citus where a
-- key of pgconvo's tables lives; it opens no connection.
CREATE OR REPLACE FUNCTION convo_node.node_keys()
RETURNS SETOF uuid
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_groups int[] := ARRAY(SELECT DISTINCT p.groupid FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
                             WHERE s.logicalrelid = 'convo.conversations'::regclass);
    v_seen   int[] := '{}';
    v_key    uuid;
    v_group  int;
    v_i      int := 0;
BEGIN
    WHILE cardinality(v_seen) < cardinality(v_groups) LOOP
        v_i := v_i + 1;
        IF v_i > 100000 THEN
            RAISE EXCEPTION 'no key of convo.conversations found for every node';
        END IF;
        v_key := md5(v_i::text)::uuid;
        SELECT p.groupid INTO v_group FROM pg_dist_placement p
         WHERE p.shardid = get_shard_id_for_distribution_column('convo.conversations', v_key);
        IF NOT v_group = ANY (v_seen) THEN
            v_seen := v_seen || v_group;
            RETURN NEXT v_key;
        END IF;
    END LOOP;
END;
$$;
