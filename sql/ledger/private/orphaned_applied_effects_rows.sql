-- orphaned_applied_effects_rows: the rows of the view
-- convo.orphaned_applied_effects (applied effects none of whose tool calls
-- sits on the path from the root to its conversation's current head), the
-- caller's owner's only (sees_owner: every owner for convo_reader).
-- Reachability is computed, never stored, so a later branch switch cannot
-- make it wrong. A PL/pgSQL function, so that no condition of a caller's
-- reaches its scans: the planner pushes a leakproof condition (=, <, >= on
-- a uuid, a number, a text) through a security_barrier view down to the
-- table scans below the view's owner filter, and EXPLAIN ANALYZE's actual
-- row counts there would count, and so read by halving, every owner's rows.
-- A function scan shows nothing of what it reads. SECURITY DEFINER: the
-- reader holds no table privilege.
CREATE OR REPLACE FUNCTION convo_private.orphaned_applied_effects_rows()
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, external_ref text, amount_minor bigint,
               currency char(3), settled_at timestamptz, tool_call_ids text[])
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
    RETURN QUERY SELECT * FROM convo_private.orphaned_applied_effects_in('convo.tool_effects', 'convo.conversations',
                                                                      'convo.tool_effect_calls', 'convo.messages');
END;
$$;
