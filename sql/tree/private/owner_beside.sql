-- owner_beside: the owner of p_other_conversation_id, a conversation stored
-- beside p_conversation_id (other_conversation found it there), read where
-- it is stored (beside); NULL, an owner nobody acts for, when the caller may
-- not see it (sees_conversation: another owner's, or deleted), so that
-- raise_not_found answers CV002 for it as for one that does not exist.
CREATE OR REPLACE FUNCTION convo_private.owner_beside(p_conversation_id uuid, p_other_conversation_id uuid)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner text;
BEGIN
    EXECUTE format('SELECT c.owner_id FROM %s c WHERE c.id = $1
                      AND convo_private.sees_conversation(c.owner_id, c.deleted_at, false)', convo_private.beside('convo.conversations', p_conversation_id))
       INTO v_owner USING p_other_conversation_id;
    RETURN v_owner;
END;
$$;
