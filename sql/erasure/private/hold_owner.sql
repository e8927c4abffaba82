-- hold_owner: an owner-wide erasure and whatever makes new rows of an
-- owner (a conversation, a receipt, an import) exclude each other. The
-- makers lock the owner's row of convo_private.owner_holds FOR SHARE and
-- erase_owner locks it FOR UPDATE, so erase_owner waits for an open
-- transaction that made something of the owner's (which it could not see,
-- and would leave unerased though recorded as erased), and nothing new of
-- the owner's is made while it runs. A row only the owner role may lock,
-- not an advisory lock, which any login may take under a key anyone can
-- compute, to stall an owner's work or an erasure. The row is made on first
-- use; a maker or an eraser that meets another's uncommitted one waits
-- for it.
CREATE OR REPLACE FUNCTION convo_private.hold_owner(p_owner_id text, p_exclusive boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO convo_private.owner_holds (owner_id) VALUES (p_owner_id) ON CONFLICT (owner_id) DO NOTHING;
    IF p_exclusive THEN
        PERFORM 1 FROM convo_private.owner_holds h WHERE h.owner_id = p_owner_id FOR UPDATE;
    ELSE
        PERFORM 1 FROM convo_private.owner_holds h WHERE h.owner_id = p_owner_id FOR SHARE;
    END IF;
END;
$$;
