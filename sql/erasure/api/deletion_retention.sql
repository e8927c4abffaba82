-- deletion_retention: how long a deleted conversation is kept, restorable,
-- before erase_due erases it: the database's setting
-- (set_deletion_retention), 30 days until a DBA sets it.
CREATE OR REPLACE FUNCTION convo.deletion_retention()
RETURNS interval
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
    SELECT coalesce((SELECT s.deletion_retention FROM convo_private.settings s), interval '30 days')
$$;

COMMENT ON FUNCTION convo.deletion_retention() IS
    'How long a deleted conversation is kept before erase_due erases it (30 days until set_deletion_retention).';
