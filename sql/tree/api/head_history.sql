-- head_history: every head movement of a conversation, oldest first.
CREATE OR REPLACE FUNCTION convo.head_history(p_conversation_id uuid)
RETURNS TABLE (seq bigint, head_message_id uuid, previous_head_id uuid, moved_at timestamptz,
               moved_by text, reason text)
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
    RETURN QUERY
    SELECT l.seq, l.head_message_id, l.previous_head_id, l.moved_at, l.moved_by, l.reason
      FROM convo.conversation_head_log l
     WHERE l.conversation_id = p_conversation_id
     ORDER BY l.seq;
END;
$$;

COMMENT ON FUNCTION convo.head_history(uuid) IS
    'Every head movement of the conversation, oldest first (the append-only head log).';
