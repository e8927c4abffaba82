-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. SECURITY DEFINER: it is
-- the one writer of the head log besides a superuser. The reason and mover
-- come from move_head_to (pgconvo's own moves) or conversations_guard (any
-- other UPDATE: direct_update by the caller); it clears them after use.
-- An import (is_import) writes the exported log rows instead. Every move,
-- an import's too, moves the live-path index (move_live_path) with the head.
CREATE OR REPLACE FUNCTION convo_private.log_head_move()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason   text := nullif(current_setting('convo.head_reason', true), '');
    v_moved_by text := nullif(current_setting('convo.head_moved_by', true), '');
BEGIN
    PERFORM convo_private.move_live_path(NEW.id, NEW.head_message_id, OLD.head_message_id);
    -- An import writes the exported head log itself, the move to its head included.
    IF convo_private.is_import(NEW.id) THEN
        RETURN NULL;
    END IF;
    IF v_reason IS NULL THEN
        v_reason := 'direct_update';
        v_moved_by := convo_private.caller();
    END IF;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;
