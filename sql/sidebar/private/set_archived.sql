-- set_archived: what archive_conversation and unarchive_conversation share:
-- after the owner check and the conversation's lock, its archive state
-- becomes p_archived and the change is logged (log_change); a conversation
-- already in that state is left alone and nothing is logged. Nothing is
-- deleted: an archived conversation is only left out of conversations().
CREATE OR REPLACE FUNCTION convo_private.set_archived(p_conversation_id uuid, p_archived boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_was boolean;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    SELECT c.archived INTO v_was FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF v_was IS DISTINCT FROM p_archived THEN
        UPDATE convo.conversations c SET archived = p_archived WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_change(p_conversation_id, 'archived', v_was::text, p_archived::text,
                                         convo_private.caller(), NULL);
    END IF;
END;
$$;
