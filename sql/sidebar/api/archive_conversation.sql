-- archive_conversation: hides a conversation from conversations() (the
-- sidebar) until unarchive_conversation; logged in the change log like a
-- title. Nothing is deleted; path, export and every other call still work.
CREATE OR REPLACE FUNCTION convo.archive_conversation(p_conversation_id uuid)
RETURNS void
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
    PERFORM convo_private.set_archived(p_conversation_id, true);
END;
$$;

COMMENT ON FUNCTION convo.archive_conversation(uuid) IS
    'Hide a conversation from conversations() (logged: who, when); nothing is deleted. A repeat changes nothing.';
