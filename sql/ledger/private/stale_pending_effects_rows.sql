-- stale_pending_effects_rows: the rows of the view
-- convo.stale_pending_effects (effects pending or awaiting confirmation
-- past their deadline), the caller's owner's only (sees_owner). A
-- PL/pgSQL function, SECURITY DEFINER, like orphaned_applied_effects_rows:
-- no condition of a caller's reaches its scans, nor does EXPLAIN show them.
CREATE OR REPLACE FUNCTION convo_private.stale_pending_effects_rows()
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, state text, idempotency_key text,
               requested_at timestamptz, deadline_at timestamptz)
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
    RETURN QUERY SELECT * FROM convo_private.stale_pending_effects_in('convo.tool_effects', 'convo.conversations');
END;
$$;
