-- new_conversation_held: new_conversation on the conversation's node, for
-- an owner held in this distributed transaction: p_hold is hold_for_new's
-- token (CV011 otherwise, and nothing is written).
CREATE OR REPLACE FUNCTION convo_node.new_conversation_held(
    p_conversation_id uuid,
    p_owner_id        text,
    p_system_prompt   text,
    p_metadata        jsonb,
    p_given           boolean,
    p_hold            text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_hold IS DISTINCT FROM convo_private.keyed_digest(format('hold:%s:%s', convo_node.distributed_transaction(),
                                                                 p_owner_id)) THEN
        RAISE EXCEPTION 'owner % is not held in this transaction: create conversations with create_conversation', p_owner_id
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN convo_private.new_conversation(p_conversation_id, p_owner_id, p_system_prompt, p_metadata, p_given);
END;
$$;
