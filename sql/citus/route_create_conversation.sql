-- route_create_conversation: create_conversation on a distributed
-- database, as a router that runs as its caller and makes two calls, each
-- handed whole to one node: the owner's checks and hold on the owner's node
-- (hold_new_owner), then the conversation on the node of its id
-- (new_conversation), the id picked here when the caller gave none, so
-- that it is a constant Citus can route by. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_create_conversation()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_router regprocedure := 'convo.create_conversation(text, text, jsonb, uuid)';
BEGIN
    PERFORM convo_node.grant_like(convo_node.delegate('convo_private.hold_new_owner(text, text)', 'p_owner_id',
                                                      'convo.tool_receipts'), v_router);
    PERFORM convo_node.grant_like(convo_node.delegate('convo_private.new_conversation(uuid, text, text, jsonb, boolean)',
                                                      'p_conversation_id', 'convo.conversations'), v_router);
    CREATE OR REPLACE FUNCTION convo.create_conversation(
        p_owner_id        text,
        p_system_prompt   text DEFAULT NULL,
        p_metadata        jsonb DEFAULT '{}',
        p_conversation_id uuid DEFAULT NULL)
    RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $body$
    DECLARE
        v_id     uuid := coalesce(p_conversation_id, gen_random_uuid());
        v_result uuid;
    BEGIN
        IF p_owner_id IS NULL THEN
            RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL';
        END IF;
        PERFORM convo_node.pass_owner();
        EXECUTE format('SELECT * FROM convo_node.hold_new_owner_delegated(%L::text, $1)', p_owner_id)
          USING ARRAY['create conversations'];
        EXECUTE format('SELECT * FROM convo_node.new_conversation_delegated(%L::uuid, $1, $2, $3, $4)', v_id)
           INTO v_result
          USING ARRAY[p_owner_id], ARRAY[p_system_prompt], ARRAY[p_metadata], ARRAY[p_conversation_id IS NOT NULL];
        RETURN v_result;
    END;
    $body$;
    ALTER FUNCTION convo.create_conversation(text, text, jsonb, uuid) OWNER TO convo_owner;
END;
$$;
