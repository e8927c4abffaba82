-- cancel_generation: streaming to cancelled (the user pressed stop). A
-- repeat is a no-op; anything else on an ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.cancel_generation(p_conversation_id uuid, p_generation_id uuid)
RETURNS void
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
    v_now        timestamptz;
    v_generation convo.generations;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_generation := convo_private.generation_ref(p_conversation_id, p_generation_id);
    IF v_generation.state = 'cancelled' THEN
        RETURN;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation is cancelled', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'cancelled', finished_at = v_now
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
END;
$$;

COMMENT ON FUNCTION convo.cancel_generation(uuid, uuid) IS 'A streaming generation was cancelled.';
