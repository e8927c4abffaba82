-- log_direct_change: a title, archive state or deletion changed by an UPDATE outside
-- pgconvo's code (a superuser, or a role a DBA gave UPDATE) is logged like
-- any change, by the caller, so no title changes without a trace.
-- SECURITY DEFINER: it writes the change log as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.log_direct_change()
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
    IF NEW.title IS DISTINCT FROM OLD.title THEN
        PERFORM convo_private.log_change(NEW.id, 'title', OLD.title, NEW.title, convo_private.caller(), NULL);
    END IF;
    IF NEW.archived IS DISTINCT FROM OLD.archived THEN
        PERFORM convo_private.log_change(NEW.id, 'archived', OLD.archived::text, NEW.archived::text,
                                         convo_private.caller(), NULL);
    END IF;
    IF NEW.deleted_at IS DISTINCT FROM OLD.deleted_at THEN
        PERFORM convo_private.log_change(NEW.id, 'deleted', (OLD.deleted_at IS NOT NULL)::text,
                                         (NEW.deleted_at IS NOT NULL)::text, convo_private.caller(), NULL);
    END IF;
    RETURN NULL;
END;
$$;
