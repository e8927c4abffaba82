-- local_shards: the shards of p_table on this node, by name: what a
-- function run once on each node (node_keys) reads, as plain tables, where
-- Citus would route a statement over p_table to every node.
CREATE OR REPLACE FUNCTION convo_node.local_shards(p_table regclass)
RETURNS SETOF text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT shard_name(s.logicalrelid, s.shardid)
      FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
     WHERE s.logicalrelid = p_table AND p.groupid = (SELECT g.groupid FROM pg_dist_local_group g)
     ORDER BY s.shardid
$$;
