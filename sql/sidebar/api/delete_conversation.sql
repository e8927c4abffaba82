-- delete_conversation: the owner's "delete chat". The conversation is
-- hidden at once (conversations() leaves it out; every other call of the
-- owner's answers CV002, as for one that does not exist), the deletion is
-- logged in the change log like a title, and erase_due erases it once the
-- database's retention period (deletion_retention) has run out from its
-- deletion. Until then convo_admin can bring it back
-- (restore_deleted_conversation); nothing is removed before. Its ledger
-- stays listed where it is listed (orphaned_applied_effects,
-- stale_pending_effects): an applied charge is still a charge. A repeat by
-- convo_admin changes nothing.
CREATE OR REPLACE FUNCTION convo.delete_conversation(p_conversation_id uuid)
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
    PERFORM convo_private.set_deleted(p_conversation_id, true);
END;
$$;

COMMENT ON FUNCTION convo.delete_conversation(uuid) IS
    'Delete a conversation: hidden at once (CV002 to its owner), logged, erased by erase_due once the retention period has run out.';
