-- restore_deleted_conversation: brings a deleted conversation back (a
-- mistaken click, an abuse report's review), as it was, logged like its
-- deletion; convo_admin's. Only before it is erased: an erased one is
-- CV006 (its content is gone; erase_due erases a deleted one once the
-- retention period has run out). A conversation not deleted is left alone.
CREATE OR REPLACE FUNCTION convo.restore_deleted_conversation(p_conversation_id uuid)
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
    PERFORM convo_private.set_deleted(p_conversation_id, false);
END;
$$;

COMMENT ON FUNCTION convo.restore_deleted_conversation(uuid) IS
    'Bring a deleted conversation back before erase_due erases it (logged); CV006 once it is erased.';
