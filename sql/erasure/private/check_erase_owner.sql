-- check_erase_owner: the arguments and the session of erase_owner, checked
-- before any lock is taken: an owner this session may write for
-- (check_owner: CV011, as begin_receipt answers another owner), a reason
-- (CV011, at most max_ref_length: CV010), and READ COMMITTED (0A000): a snapshot
-- taken before erase_owner waits for the owner's transactions could not
-- see what they made, and would record the owner as erased and leave that.
CREATE OR REPLACE FUNCTION convo_private.check_erase_owner(p_owner_id text, p_reason text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.check_owner(p_owner_id, 'erase the content');
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
END;
$$;
