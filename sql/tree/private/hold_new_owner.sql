-- hold_new_owner: the owner checks of whatever makes a conversation (a
-- new one, an import), p_action saying what in the error (check_owner: a
-- convo_app session makes them only for the owner it set); then it holds
-- the owner against an owner-wide erasure running meanwhile (hold_owner). On a
-- distributed database it runs on the owner's node, apart from the
-- conversation's.
CREATE OR REPLACE FUNCTION convo_private.hold_new_owner(p_owner_id text, p_action text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.check_owner(p_owner_id, p_action);
    PERFORM convo_private.hold_owner(p_owner_id, false);
END;
$$;
