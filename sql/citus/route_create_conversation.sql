-- route_create_conversation: create_conversation on a distributed
-- database, as a router that runs as its caller and makes two calls, each
-- handed whole to one node: the owner's checks and hold on the owner's node
-- (hold_for_new), then the conversation on the node of its id, with the
-- hold's token (new_conversation_held), the id picked here when the caller gave none, so
-- that it is a constant Citus can route by. Idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_create_conversation()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_router regprocedure := 'convo.create_conversation(text, text, jsonb, uuid)';
BEGIN
    PERFORM convo_node.grant_like(convo_node.delegate('convo_node.hold_for_new(text, text)', 'p_owner_id',
                                                      'convo.tool_receipts'), v_router);
    PERFORM convo_node.grant_like(convo_node.delegate(
        'convo_node.new_conversation_held(uuid, text, text, jsonb, boolean, text)',
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
        v_hold   text;
        v_result uuid;
    BEGIN
        IF p_owner_id IS NULL THEN
            RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL';
        END IF;
        PERFORM convo_node.pass_owner();
        EXECUTE format('SELECT * FROM convo_node.hold_for_new_delegated(%L::text, $1)', p_owner_id)
           INTO v_hold
          USING ARRAY['create conversations'];
        EXECUTE format('SELECT * FROM convo_node.new_conversation_held_delegated(%L::uuid, $1, $2, $3, $4, $5)', v_id)
           INTO v_result
          USING ARRAY[p_owner_id], ARRAY[p_system_prompt], ARRAY[p_metadata], ARRAY[p_conversation_id IS NOT NULL],
                ARRAY[v_hold];
        RETURN v_result;
    END;
    $body$;
    ALTER FUNCTION convo.create_conversation(text, text, jsonb, uuid) OWNER TO convo_owner;
END;
$$;
