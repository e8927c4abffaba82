-- erase_owner: erase_conversation for every conversation of an owner, and
-- the owner's receipts (request, arguments, expected values), in one
-- transaction; each conversation's erasure and the receipts' are recorded
-- on their own. An owner with nothing stored is not an error. It holds the
-- owner exclusive first (hold_owner), so it waits for every open transaction
-- that made a conversation, receipt or import of the owner's and nothing new
-- is made meanwhile, then locks and erases exactly the conversations it
-- listed. convo_admin's;
-- the caller (convo_private.caller, not a SECURITY DEFINER helper's owner)
-- must be one that may write for the owner, else CV011.
CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
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
DECLARE
    v_ids uuid[];
    v_id  uuid;
BEGIN
    PERFORM convo_private.check_erase_owner(p_owner_id, p_reason);
    PERFORM convo_private.hold_owner(p_owner_id, true);
    -- Lock the owner's conversations in one order, each by its key, as every
    -- writer would, and erase exactly those.
    SELECT array_agg(c.id ORDER BY c.id) INTO v_ids FROM convo.conversations c WHERE c.owner_id = p_owner_id;
    FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
    END LOOP;
    RETURN QUERY
    SELECT e.place, sum(e.rows_redacted)::bigint
      FROM (SELECT x.* FROM unnest(v_ids) AS c (id)
                  CROSS JOIN LATERAL convo_private.erase_content(p_owner_id, c.id, p_reason) x
            UNION ALL
            SELECT y.* FROM convo_private.erase_content(p_owner_id, NULL, p_reason) y) e
     GROUP BY e.place
     ORDER BY e.place;
END;
$$;

COMMENT ON FUNCTION convo.erase_owner(text, text) IS
    'Erase the content of every conversation and receipt of an owner, keeping their shape; recorded with p_reason.';
