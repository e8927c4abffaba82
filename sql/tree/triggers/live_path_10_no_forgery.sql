-- live_path_10_no_forgery: the derived index of the live paths is written
-- only by pgconvo's code (log_head_move, move_live_path), or a superuser;
-- never emptied by TRUNCATE, which row-level security does not bind.
CREATE OR REPLACE TRIGGER live_path_10_no_forgery
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON convo.live_path
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.live_path ENABLE ALWAYS TRIGGER live_path_10_no_forgery;
