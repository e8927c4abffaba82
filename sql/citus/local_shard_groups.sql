-- local_shard_groups: for each shard of p_tables[1] on this node, the
-- names of the shards of each of p_tables (co-located with it) that hold
-- the same conversations, in p_tables' order: the relations a function run
-- once on each node (node_keys) reads together, as plain tables.
CREATE OR REPLACE FUNCTION convo_node.local_shard_groups(p_tables regclass[])
RETURNS SETOF text[]
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT shard_name(o.logicalrelid, o.shardid)
                   FROM unnest(p_tables) WITH ORDINALITY AS t (rel, n)
                   JOIN pg_dist_shard o ON o.logicalrelid = t.rel AND o.shardminvalue = s.shardminvalue
                  ORDER BY t.n)
      FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
     WHERE s.logicalrelid = p_tables[1] AND p.groupid = (SELECT g.groupid FROM pg_dist_local_group g)
     ORDER BY s.shardid
$$;
