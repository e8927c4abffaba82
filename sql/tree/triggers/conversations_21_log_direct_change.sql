-- conversations_21_log_direct_change: a title or archive state changed outside
-- pgconvo's code (a direct UPDATE) is logged in the change log, by the caller,
-- in the same transaction; pgconvo's own changes log themselves (log_change).
CREATE OR REPLACE TRIGGER conversations_21_log_direct_change
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN ((OLD.title IS DISTINCT FROM NEW.title OR OLD.archived IS DISTINCT FROM NEW.archived) AND (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner'))
    EXECUTE FUNCTION convo_private.log_direct_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_21_log_direct_change;
