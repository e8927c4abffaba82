-- conversations_20_log_direct: a head moved outside pgconvo's code (a direct
-- UPDATE) writes exactly one head-log row, direct_update by the caller, in
-- the same transaction; pgconvo's own moves log themselves (log_head_move).
CREATE OR REPLACE TRIGGER conversations_20_log_direct
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id AND (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner'))
    EXECUTE FUNCTION convo_private.log_direct_head_move();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_20_log_direct;
