-- hold_owner: an owner-wide erasure and whatever makes new rows of an
-- owner (a conversation, a receipt, an import) exclude each other. The
-- makers hold the owner's lock shared and erase_owner holds it exclusive,
-- so erase_owner waits for an open transaction that made something of the
-- owner's (which it could not see, and would leave unerased though
-- recorded as erased), and nothing new of the owner's is made while it
-- runs. A transaction-level advisory lock in the two-key space (pgconvo's
-- class, a hash of the owner id), apart from the one-key locks
-- golang-migrate and applications take: two owners whose ids share a hash
-- only make one wait for the other.
CREATE OR REPLACE FUNCTION convo_private.hold_owner(p_owner_id text, p_exclusive boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_exclusive THEN
        PERFORM pg_advisory_xact_lock(hashtext('pgconvo owner'), hashtext(p_owner_id));
    ELSE
        PERFORM pg_advisory_xact_lock_shared(hashtext('pgconvo owner'), hashtext(p_owner_id));
    END IF;
END;
$$;
