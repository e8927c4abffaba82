-- beside: the relation that holds p_table's rows stored beside
-- p_conversation_id's: p_table itself on one server; on a distributed
-- database, p_table's shard that holds the conversation, on the node a
-- delegated call runs on (Citus routes none of its statements to another
-- conversation's rows, even in that shard). What an error names there is
-- looked up there: the lookups by id alone of raise_not_found's callers.
CREATE OR REPLACE FUNCTION convo_private.beside(p_table regclass, p_conversation_id uuid)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shard text;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT shard_name(p.logicalrelid, get_shard_id_for_distribution_column(p.logicalrelid, $2))
                   FROM pg_dist_partition p WHERE p.logicalrelid = $1 AND p.partmethod = ''h'''
           INTO v_shard USING p_table, p_conversation_id;
    END IF;
    RETURN coalesce(v_shard, p_table::text);
END;
$$;
