-- check_owner: an owner the session may act for, checked before anything
-- of the owner's is made, changed or locked: an owner is required, at most
-- max_id_length characters, and one this session may write for
-- (writes_owner: every owner for convo_admin, else the one its session
-- set); CV011 otherwise, p_action saying what was refused. The one owner
-- check of conversations, imports, receipts and erasure.
CREATE OR REPLACE FUNCTION convo_private.check_owner(p_owner_id text, p_action text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL'));
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not % for owner %', p_action, p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first (convo_admin acts for any owner).';
    END IF;
END;
$$;
