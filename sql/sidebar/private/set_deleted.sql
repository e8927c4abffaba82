-- set_deleted: what delete_conversation and restore_deleted_conversation
-- share: after the conversation's lock (lock_conversation, which answers
-- CV002 for a deleted conversation to a caller that writes for its owner
-- alone), it is deleted now (p_deleted) or brought back, and the change is
-- logged (log_change: 'deleted', false to true or back). A conversation
-- already in that state is left alone and nothing is logged; an erased one
-- is never brought back (CV006).
CREATE OR REPLACE FUNCTION convo_private.set_deleted(p_conversation_id uuid, p_deleted boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_conversation convo.conversations;
    v_now          timestamptz := clock_timestamp();
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    SELECT * INTO v_conversation FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF (v_conversation.deleted_at IS NOT NULL) = p_deleted THEN
        RETURN;
    END IF;
    IF NOT p_deleted AND v_conversation.erased_at IS NOT NULL THEN
        RAISE EXCEPTION 'conversation % is erased: a deleted conversation comes back only before its erasure', p_conversation_id
            USING ERRCODE = 'CV006',
                  DETAIL = format('conversation %s, deleted at %s, erased at %s', p_conversation_id,
                                  v_conversation.deleted_at, v_conversation.erased_at);
    END IF;
    -- The time as a value: an UPDATE calls no volatile function (Citus
    -- refuses one in an UPDATE of a distributed table).
    UPDATE convo.conversations c
       SET deleted_at = CASE WHEN p_deleted THEN v_now END
     WHERE c.id = p_conversation_id;
    PERFORM convo_private.log_change(p_conversation_id, 'deleted', (NOT p_deleted)::text, p_deleted::text,
                                     convo_private.caller(), NULL);
END;
$$;
