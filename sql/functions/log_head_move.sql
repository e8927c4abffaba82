-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. The API functions name
-- the reason through transaction-local settings (move_head_to); any other
-- UPDATE is logged as 'direct_update' by session_user.
CREATE OR REPLACE FUNCTION convo.log_head_move()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_reason   text := nullif(current_setting('convo.head_reason', true), '');
    v_moved_by text := nullif(current_setting('convo.head_moved_by', true), '');
BEGIN
    IF v_reason IS NULL THEN
        v_reason := 'direct_update';
        v_moved_by := session_user;
    END IF;
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;
