-- head_at: the head at an instant, read from the head log (the last move at
-- or before p_at); NULL if the conversation had no head yet.
CREATE OR REPLACE FUNCTION convo.head_at(p_conversation_id uuid, p_at timestamptz)
RETURNS uuid
LANGUAGE plpgsql
STABLE
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
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'p_at is required' USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN (SELECT l.head_message_id
              FROM convo.conversation_head_log l
             WHERE l.conversation_id = p_conversation_id AND l.moved_at <= p_at
             ORDER BY l.moved_at DESC, l.seq DESC
             LIMIT 1);
END;
$$;

COMMENT ON FUNCTION convo.head_at(uuid, timestamptz) IS
    'The head at instant p_at, from the head log; NULL before the first head.';
