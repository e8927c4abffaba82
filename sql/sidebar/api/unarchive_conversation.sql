-- unarchive_conversation: shows an archived conversation in
-- conversations() again; logged like archive_conversation.
CREATE OR REPLACE FUNCTION convo.unarchive_conversation(p_conversation_id uuid)
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
    PERFORM convo_private.set_archived(p_conversation_id, false);
END;
$$;

COMMENT ON FUNCTION convo.unarchive_conversation(uuid) IS
    'Show an archived conversation in conversations() again (logged: who, when). A repeat changes nothing.';
