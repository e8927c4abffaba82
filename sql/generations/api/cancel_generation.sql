-- cancel_generation: streaming to cancelled (the user pressed stop). With
-- p_parts, what was streamed until then is kept: it becomes the assistant
-- answer to the prompt, placed and heading as complete_generation places
-- an answer (place_answer), marked incomplete (path shows it), and the
-- generation names it; returns its id (NULL without p_parts, when nothing
-- else changes). A repeat is a no-op returning the same (one without
-- p_parts too); anything else on an ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.cancel_generation(
    p_conversation_id uuid,
    p_generation_id   uuid,
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
    IF v_generation.state = 'cancelled'
       AND (p_parts IS NULL
            OR (SELECT m.parts FROM convo.messages m
                 WHERE m.conversation_id = p_conversation_id AND m.id = v_generation.message_id)::text = p_parts::text) THEN
        RETURN v_generation.message_id;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation is cancelled', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    IF p_parts IS NOT NULL THEN
        v_message := convo_private.place_answer(p_conversation_id, v_head, v_generation, p_parts, true);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'cancelled', message_id = v_message, finished_at = v_now
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
    RETURN v_message;
END;
$$;

COMMENT ON FUNCTION convo.cancel_generation(uuid, uuid, jsonb) IS
    'A streaming generation was cancelled; with p_parts, what was streamed is kept as its answer, marked incomplete (returns its id).';
