-- erase_owned: one of an owner's conversations erased for erase_owner, on
-- its node: locked by its key, as every writer locks it, and erased and
-- recorded there (erase_content), if it is still the owner's. Its
-- arguments and session are checked again here (check_erase_owner), for a
-- caller that calls it without the router.
CREATE OR REPLACE FUNCTION convo_node.erase_owned(p_conversation_id uuid, p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.check_erase_owner(p_owner_id, p_reason);
    PERFORM 1 FROM convo.conversations c WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id FOR NO KEY UPDATE;
    IF FOUND THEN
        RETURN QUERY SELECT * FROM convo_private.erase_content(p_owner_id, p_conversation_id, p_reason);
    END IF;
END;
$$;
