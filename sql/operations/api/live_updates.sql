-- live_updates: whether this database sends live-update notifications
-- (convo_head, convo_effect): the database's setting (set_live_updates),
-- on until a DBA sets it. A listener that reads false polls head_history
-- by seq instead of waiting; a session's convo.notify = off is not
-- reflected here (it silences that session only).
CREATE OR REPLACE FUNCTION convo.live_updates()
RETURNS boolean
LANGUAGE sql
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
    SELECT coalesce((SELECT s.live_updates FROM convo_private.settings s), true)
$$;

COMMENT ON FUNCTION convo.live_updates() IS
    'Whether the database sends live-update notifications on convo_head and convo_effect (on until set_live_updates).';
