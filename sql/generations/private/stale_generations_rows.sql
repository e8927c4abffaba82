-- stale_generations_rows: the rows of the view convo.stale_generations
-- (generations still streaming after generation_stale_after()), the
-- caller's owner's only (sees_owner). A PL/pgSQL function, SECURITY
-- DEFINER, like orphaned_applied_effects_rows: no condition of a caller's
-- reaches its scans, nor does EXPLAIN show them.
CREATE OR REPLACE FUNCTION convo_private.stale_generations_rows()
RETURNS TABLE (conversation_id uuid, generation_id uuid, model text, prompt_message_id uuid, started_at timestamptz)
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
    RETURN QUERY SELECT * FROM convo_private.stale_generations_in('convo.generations', 'convo.conversations');
END;
$$;
