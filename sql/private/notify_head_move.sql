-- notify_head_move: sends every head-log row, whoever wrote it (the API or a
-- direct UPDATE logged as direct_update), to channel convo_head, from the
-- transaction that moved the head: pg_notify is transactional, so a move
-- that rolls back is never heard. LISTEN is not owner-scoped (any role that
-- may connect to the database may listen), so the payload holds ids, seq and
-- reason only: never content, the owner or who moved it.
CREATE OR REPLACE FUNCTION convo_private.notify_head_move()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('convo_head', json_build_object(
        'conversation_id', NEW.conversation_id, 'seq', NEW.seq, 'head_message_id', NEW.head_message_id,
        'previous_head_id', NEW.previous_head_id, 'reason', NEW.reason)::text);
    RETURN NULL;
END;
$$;
