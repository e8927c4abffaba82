-- new_conversation: the conversation row of create_conversation, whose
-- owner hold_new_owner has checked and holds, with id p_conversation_id
-- (given by the caller when p_given: then a taken id is a retry, the same
-- call returning it, anything else CV009); with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
CREATE OR REPLACE FUNCTION convo_private.new_conversation(
    p_conversation_id uuid,
    p_owner_id        text,
    p_system_prompt   text,
    p_metadata        jsonb,
    p_given           boolean)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_existing convo.conversations;
    v_taken    boolean := false;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
BEGIN
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'p_metadata must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF octet_length(p_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s: %s bytes', p_owner_id, octet_length(p_metadata::text));
    END IF;

    -- A given id that is taken is a retry: read first without a lock, so
    -- that another owner's row is never locked or waited for (an UPDATE in
    -- progress would hold up an INSERT ... ON CONFLICT on it).
    IF p_given THEN
        PERFORM FROM convo.conversations c WHERE c.id = p_conversation_id;
        v_taken := FOUND;
    END IF;
    IF NOT v_taken THEN
        INSERT INTO convo.conversations (id, owner_id, metadata)
        VALUES (p_conversation_id, p_owner_id, p_metadata)
        ON CONFLICT (id) DO NOTHING;
        v_taken := NOT FOUND; -- a concurrent call with the same id came first
    END IF;
    IF v_taken THEN
        -- The same owner, metadata and system prompt return the first
        -- result; anything else, another owner's id included, is CV009,
        -- and so is a deleted conversation of the owner's to a caller that
        -- writes for the owner alone (sees_conversation: one that does not exist
        -- for it, whose prompt is not to be guessed at). Locked only if it
        -- is this owner's.
        SELECT * INTO v_existing FROM convo.conversations c
         WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id
           AND convo_private.sees_conversation(c.owner_id, c.deleted_at, true)
           FOR NO KEY UPDATE;
        -- The system prompt is the message the 'create' move named, whatever
        -- was appended since; compared as text, like the metadata.
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata::text IS DISTINCT FROM p_metadata::text
           OR (SELECT m.parts FROM convo.conversation_head_log l
                 JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.head_message_id
                WHERE l.conversation_id = p_conversation_id AND l.reason = 'create')::text IS DISTINCT FROM v_parts::text THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', p_conversation_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', p_conversation_id);
        END IF;
        RETURN p_conversation_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        PERFORM convo_private.write_messages(p_conversation_id, NULL,
            p_messages => ARRAY[(v_root, NULL, 'system', v_parts, NULL, NULL, false)::convo_private.new_message],
            p_head => v_root, p_head_reason => 'create');
    END IF;
    RETURN p_conversation_id;
END;
$$;
