-- conversations_guard: of a conversation only the head may change (and its
-- metadata by an erasure: conversations_erasure_only); its id, owner and
-- creation time are fixed, and a head once set is never unset (the head
-- always names a message).
-- It runs as the role that issued the UPDATE (not SECURITY DEFINER), so it
-- can tell pgconvo's own move (current_user convo_owner, reason and mover
-- named by move_head_to) from any other: that one is marked direct_update by
-- the caller here (the role SET ROLE set, else the login role: the
-- expression of convo_private.caller, written out because the updating role
-- may not reach convo_private), whatever settings the session holds, for log_head_move.
CREATE OR REPLACE FUNCTION convo_private.conversations_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'a conversation''s id, owner_id and created_at never change'
            USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id);
    END IF;
    IF OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL THEN
        RAISE EXCEPTION 'the head of a conversation cannot be unset'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, head %s', OLD.id, OLD.head_message_id);
    END IF;
    IF NEW.head_message_id IS DISTINCT FROM OLD.head_message_id AND current_user <> 'convo_owner' THEN
        PERFORM set_config('convo.head_reason', 'direct_update', true);
        PERFORM set_config('convo.head_moved_by', coalesce(nullif(current_setting('role'), 'none'), session_user::text), true);
    END IF;
    RETURN NEW;
END;
$$;
