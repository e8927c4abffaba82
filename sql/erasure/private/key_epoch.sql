-- key_epoch: a conversation's key epoch at p_at (NULL: now): the number of
-- its erasures recorded by then (erase_conversation's, or erase_owner's one
-- per conversation), by the erasures' index. scope_key digests it, so that a
-- call after an erasure never shares a key with the erased calls before it.
-- An effect's epoch is the one at its requested_at, a call's at its
-- decided_at: an erasure at the same instant counts, since it redacted the
-- effect, whose key is then no longer computed from its input. PL/pgSQL:
-- Citus plans no SQL function's parameters in a query it routes.
CREATE OR REPLACE FUNCTION convo_private.key_epoch(p_conversation_id uuid, p_at timestamptz)
RETURNS int
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT count(*)::int FROM convo.erasures r
             WHERE r.conversation_id = p_conversation_id AND (p_at IS NULL OR r.erased_at <= p_at));
END;
$$;
