-- hold_for_new: create_conversation's first step on the owner's node: the
-- owner checked and held (hold_new_owner), and a token that says so for
-- this owner and this distributed transaction, a keyed digest no caller
-- can compute. new_conversation_held, on the conversation's node, makes
-- the conversation only with it: nobody makes an owner's conversation
-- without holding the owner against an owner-wide erasure, whatever they
-- call.
CREATE OR REPLACE FUNCTION convo_node.hold_for_new(p_owner_id text, p_action text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, p_action);
    RETURN convo_private.keyed_digest(format('hold:%s:%s', convo_node.distributed_transaction(), p_owner_id));
END;
$$;
