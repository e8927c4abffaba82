-- route_erase_owner: erase_owner on a distributed database, as a router
-- that runs as its caller: the owner's receipts first, on the owner's node,
-- where the owner is checked and held (erase_receipts); then the owner's
-- conversations, gathered from each node (owner_conversations_on_node) and
-- erased each on its own node in one order (erase_owned); the rows per
-- place summed as on one server. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_erase_owner()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_router regprocedure := 'convo.erase_owner(text, text)';
BEGIN
    PERFORM convo_node.grant_like(convo_node.delegate('convo_node.erase_receipts(text, text)', 'p_owner_id',
                                                      'convo.tool_receipts'), v_router);
    PERFORM convo_node.grant_like(convo_node.delegate('convo_node.owner_conversations_on_node(uuid, text)', 'p_key',
                                                      'convo.conversations'), v_router);
    PERFORM convo_node.grant_like(convo_node.delegate('convo_node.erase_owned(uuid, text, text)', 'p_conversation_id',
                                                      'convo.conversations'), v_router);
    CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
    RETURNS TABLE (place text, rows_redacted bigint)
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $body$
    DECLARE
        v_key  uuid;
        v_ids  jsonb := '[]';
        v_id   uuid;
        v_part jsonb;
        v_rows jsonb;
    BEGIN
        IF p_owner_id IS NULL THEN
            RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL or empty';
        END IF;
        PERFORM convo_node.pass_owner();
        EXECUTE format('SELECT * FROM convo_node.erase_receipts_delegated(%L::text, $1)', p_owner_id)
           INTO v_rows USING ARRAY[p_reason];
        FOR v_key IN SELECT * FROM convo_node.node_keys() LOOP
            EXECUTE format('SELECT * FROM convo_node.owner_conversations_on_node_delegated(%L::uuid, $1)', v_key)
               INTO v_part USING ARRAY[p_owner_id];
            v_ids := v_ids || v_part;
        END LOOP;
        FOR v_id IN SELECT u.id::uuid FROM jsonb_array_elements_text(v_ids) AS u (id) ORDER BY u.id::uuid LOOP
            EXECUTE format('SELECT * FROM convo_node.erase_owned_delegated(%L::uuid, $1, $2)', v_id)
               INTO v_part USING ARRAY[p_owner_id], ARRAY[p_reason];
            v_rows := v_rows || v_part;
        END LOOP;
        RETURN QUERY
        SELECT x.place, sum(x.rows_redacted)::bigint
          FROM jsonb_to_recordset(v_rows) AS x (place text, rows_redacted bigint)
         GROUP BY x.place
         ORDER BY x.place;
    END;
    $body$;
    ALTER FUNCTION convo.erase_owner(text, text) OWNER TO convo_owner;
END;
$$;
