-- fail_generation: streaming to failed, with an error code and details
-- (the provider dropped the stream). With p_parts, what was streamed until
-- then is kept as cancel_generation keeps it: the assistant answer, placed
-- as complete_generation places one, marked incomplete; returns its id
-- (NULL without p_parts). An exact repeat is a no-op; anything else on an
-- ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.fail_generation(
    p_conversation_id uuid,
    p_generation_id   uuid,
    p_error_code      text,
    p_error           jsonb DEFAULT '{}',
    p_parts           jsonb DEFAULT NULL)
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
    v_head       uuid := convo_private.lock_conversation(p_conversation_id);
    v_generation convo.generations := convo_private.generation_ref(p_conversation_id, p_generation_id);
    v_message    uuid;
    v_now        timestamptz;
BEGIN
    IF p_error_code IS NULL OR p_error_code = '' OR p_error IS NULL THEN
        RAISE EXCEPTION 'p_error_code and p_error are required' USING ERRCODE = 'CV011',
            DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, generation %s', p_conversation_id, p_generation_id);
    END IF;
    PERFORM convo_private.check_size('p_error', p_error, convo.max_detail_bytes());
    IF v_generation.state = 'failed' AND v_generation.error_code = p_error_code AND v_generation.error::text = p_error::text
       AND (SELECT m.parts FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_generation.message_id)::text IS NOT DISTINCT FROM p_parts::text THEN
        RETURN v_generation.message_id;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation fails', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    IF p_parts IS NOT NULL THEN
        v_message := convo_private.place_answer(p_conversation_id, v_head, v_generation, p_parts, true);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'failed', error_code = p_error_code, error = p_error, message_id = v_message, finished_at = v_now
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
    RETURN v_message;
END;
$$;

COMMENT ON FUNCTION convo.fail_generation(uuid, uuid, text, jsonb, jsonb) IS
    'A streaming generation failed: record its error code and details; with p_parts, what was streamed is kept as its answer, marked incomplete (returns its id).';
