-- begin_generation: the model starts work on the path ending at the prompt
-- message. Records the head at this moment, so complete_generation can tell
-- whether the user moved on meanwhile. Retry-safe by p_generation_id.
CREATE OR REPLACE FUNCTION convo.begin_generation(
    p_conversation_id   uuid,
    p_prompt_message_id uuid,
    p_model             text,
    p_params            jsonb DEFAULT '{}',
    p_request_digest    text DEFAULT NULL,
    p_generation_id     uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_head     uuid := convo_private.lock_conversation(p_conversation_id);
    v_id       uuid := coalesce(p_generation_id, gen_random_uuid());
    v_existing convo.generations;
BEGIN
    IF p_model IS NULL OR p_model = '' OR p_params IS NULL OR jsonb_typeof(p_params) <> 'object' THEN
        RAISE EXCEPTION 'p_model and p_params (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_existing FROM convo.generations g WHERE g.conversation_id = p_conversation_id AND g.id = v_id;
    IF FOUND THEN
        IF v_existing.prompt_message_id IS DISTINCT FROM p_prompt_message_id OR v_existing.model <> p_model
           OR v_existing.params::text <> p_params::text OR v_existing.request_digest IS DISTINCT FROM p_request_digest THEN
            RAISE EXCEPTION 'generation id % is already used for a different generation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('generation %s, conversation %s', v_id, p_conversation_id);
        END IF;
        RETURN v_id;
    END IF;
    PERFORM convo_private.message_ref(p_conversation_id, p_prompt_message_id);
    PERFORM convo_private.check_size('p_params', p_params, convo.max_detail_bytes());
    IF length(p_request_digest) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_request_digest is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, prompt %s', p_conversation_id, p_prompt_message_id);
    END IF;
    INSERT INTO convo.generations (conversation_id, id, prompt_message_id, head_at_begin, model, params, request_digest)
    VALUES (p_conversation_id, v_id, p_prompt_message_id, v_head, p_model, p_params, p_request_digest);
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.begin_generation(uuid, uuid, text, jsonb, text, uuid) IS
    'Start a generation (state streaming) on the path ending at the prompt message; retry-safe by p_generation_id.';
