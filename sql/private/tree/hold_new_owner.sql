-- hold_new_owner: the owner checks of whatever makes a conversation (a
-- new one, an import), p_action saying what in the error: an owner is
-- required, at most max_id_length characters, and a convo_app session
-- makes them only for the owner it set (CV011 otherwise); then it holds the
-- owner against an owner-wide erasure running meanwhile (hold_owner). On a
-- distributed database it runs on the owner's node, apart from the
-- conversation's.
CREATE OR REPLACE FUNCTION convo_private.hold_new_owner(p_owner_id text, p_action text)
RETURNS void
LANGUAGE plpgsql
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
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
    PERFORM convo_private.hold_owner(p_owner_id, false);
END;
$$;
