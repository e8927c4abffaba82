-- log_direct_head_move: a head moved by an UPDATE outside pgconvo's code (a
-- superuser, or a role a DBA gave UPDATE) is logged like any move
-- (log_head_move: the head log, the live path, the notification), as
-- direct_update by the caller, whatever settings the session holds.
-- SECURITY DEFINER: it writes the history tables as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.log_direct_head_move()
RETURNS trigger
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
BEGIN
    PERFORM convo_private.log_head_move(NEW.id, NEW.head_message_id, OLD.head_message_id, 'direct_update',
                                        convo_private.caller(), NULL);
    RETURN NULL;
END;
$$;
