-- complete_generation: streaming to completed. The answer becomes an
-- assistant child of the prompt message in the same transaction
-- (place_answer: regenerate if the prompt already has an assistant child,
-- branch if it has other children); the head moves to it only if the head
-- is where it was at begin_generation, so a late answer does not yank a tab
-- that moved on.
-- An exact repeat returns the same message.
CREATE OR REPLACE FUNCTION convo.complete_generation(
    p_conversation_id uuid,
    p_generation_id   uuid,
    p_parts           jsonb,
    p_usage           jsonb DEFAULT '{}',
    p_finish_reason   text DEFAULT NULL)
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
    v_finished   timestamptz;
BEGIN
    IF p_parts IS NULL OR p_usage IS NULL OR jsonb_typeof(p_usage) <> 'object' THEN
        RAISE EXCEPTION 'p_parts and p_usage (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF v_generation.state = 'completed' AND v_generation.usage::text = p_usage::text
       AND v_generation.finish_reason IS NOT DISTINCT FROM p_finish_reason
       AND (SELECT m.parts FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_generation.message_id)::text = p_parts::text THEN
        RETURN v_generation.message_id;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation completes', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    PERFORM convo_private.check_size('p_usage', p_usage, convo.max_detail_bytes());
    IF length(p_finish_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_finish_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, generation %s', p_conversation_id, p_generation_id);
    END IF;
    v_message := convo_private.place_answer(p_conversation_id, v_head, v_generation, p_parts, false);
    v_finished := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'completed', message_id = v_message, usage = p_usage, finish_reason = p_finish_reason,
           finished_at = v_finished
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
    RETURN v_message;
END;
$$;

COMMENT ON FUNCTION convo.complete_generation(uuid, uuid, jsonb, jsonb, text) IS
    'Complete a streaming generation: its answer becomes a child of the prompt; the head follows only if it has not moved since begin.';
