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
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL or empty';
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    -- The caller may erase only an owner it may write for (writes_owner:
    -- every owner for convo_admin, else the one its session set), as
    -- erase_conversation may erase only such a conversation; checked before
    -- any lock is taken. CV011, as begin_receipt answers another owner.
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not erase owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Erase as a member of convo_admin, or set convo.owner_id to the owner erased.';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s', p_owner_id);
    END IF;
    -- A snapshot taken before it waits (REPEATABLE READ or SERIALIZABLE
    -- takes one at the transaction's first statement) could not see what
    -- the owner's transactions it waits for made: it would record the
    -- owner as erased and leave that.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'erase_owner runs in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = '0A000', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Call it in a transaction of its own at READ COMMITTED, the default.';
    END IF;
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
