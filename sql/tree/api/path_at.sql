-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet: the path to the head of that instant (head_at),
-- which never changes, read as path_from reads it.
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int,
               incomplete boolean)
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
    RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at), p_at);
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';
