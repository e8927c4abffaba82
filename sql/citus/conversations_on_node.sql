-- conversations_on_node: conversations() on one node, its part of a
-- sidebar page: the arguments checked (check_sidebar), then the page read
-- from each of the node's shards of convo.conversations (neither deleted nor
-- erased, as conversations() reads them), each at most
-- p_limit rows; route_conversations merges the nodes' parts. p_key only
-- names the node (node_keys).
CREATE OR REPLACE FUNCTION convo_node.conversations_on_node(
    p_key       uuid,
    p_owner_id  text,
    p_limit     int,
    p_before    timestamptz,
    p_archived  boolean,
    p_before_id uuid)
RETURNS TABLE (conversation_id uuid, title text, created_at timestamptz, last_activity_at timestamptz,
               head_message_id uuid, archived boolean)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shard text;
BEGIN
    PERFORM convo_private.check_sidebar(p_owner_id, p_limit, p_before, p_archived, p_before_id);
    FOR v_shard IN SELECT * FROM convo_node.local_shards('convo.conversations') LOOP
        RETURN QUERY EXECUTE format(
            'SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
               FROM %s c
              WHERE c.owner_id = $1 AND c.archived = $2 AND c.deleted_at IS NULL AND c.erased_at IS NULL%s
              ORDER BY c.last_activity_at DESC, c.id DESC
              LIMIT $5', v_shard,
            CASE WHEN p_before IS NOT NULL
                 THEN ' AND (c.last_activity_at, c.id) < ($3, coalesce($4, ''00000000-0000-0000-0000-000000000000''))' END)
        USING p_owner_id, p_archived, p_before, p_before_id, p_limit;
    END LOOP;
END;
$$;
