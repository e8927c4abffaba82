-- route_conversations: conversations() on a distributed database, as a
-- router that runs as its caller: a conversation's row is on the node of
-- its id, so an owner's sidebar page is a fan-out, one delegated call on
-- each node (conversations_on_node, with a key of that node: node_keys),
-- merged here in the page's order and cut to p_limit. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_conversations()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_router regprocedure := 'convo.conversations(text, integer, timestamp with time zone, boolean, uuid)';
BEGIN
    PERFORM convo_node.grant_like(convo_node.delegate(
        'convo_node.conversations_on_node(uuid, text, integer, timestamp with time zone, boolean, uuid)',
        'p_key', 'convo.conversations'), v_router);
    CREATE OR REPLACE FUNCTION convo.conversations(
        p_owner_id  text,
        p_limit     integer DEFAULT 50,
        p_before    timestamp with time zone DEFAULT NULL,
        p_archived  boolean DEFAULT false,
        p_before_id uuid DEFAULT NULL)
    RETURNS TABLE (conversation_id uuid, title text, created_at timestamp with time zone,
                   last_activity_at timestamp with time zone, head_message_id uuid, archived boolean)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $body$
    DECLARE
        v_key  uuid;
        v_part jsonb;
        v_rows jsonb := '[]';
    BEGIN
        PERFORM convo_node.pass_owner();
        FOR v_key IN SELECT * FROM convo_node.node_keys() LOOP
            EXECUTE format('SELECT * FROM convo_node.conversations_on_node_delegated(%L::uuid, $1, $2, $3, $4, $5)', v_key)
               INTO v_part
              USING ARRAY[p_owner_id], ARRAY[p_limit], ARRAY[p_before], ARRAY[p_archived], ARRAY[p_before_id];
            v_rows := v_rows || v_part;
        END LOOP;
        RETURN QUERY
        SELECT x.conversation_id, x.title, x.created_at, x.last_activity_at, x.head_message_id, x.archived
          FROM jsonb_to_recordset(v_rows) AS x (conversation_id uuid, title text, created_at timestamptz,
                                                last_activity_at timestamptz, head_message_id uuid, archived boolean)
         ORDER BY x.last_activity_at DESC, x.conversation_id DESC
         LIMIT p_limit;
    END;
    $body$;
    ALTER FUNCTION convo.conversations(text, integer, timestamp with time zone, boolean, uuid) OWNER TO convo_owner;
END;
$$;
