-- tool_effects_log_direct: an effect created or moved outside pgconvo's
-- code (a superuser's repair, which the state machine still checks) gets
-- its event like any transition (effect_event), by the caller, with no
-- evidence. SECURITY DEFINER: it writes the event log as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_log_direct()
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
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition
    END IF;
    PERFORM convo_private.effect_event(NEW.conversation_id, NEW.id,
                                       CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
                                       convo_private.caller(), '{}');
    RETURN NULL;
END;
$$;
