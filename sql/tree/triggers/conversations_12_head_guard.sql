-- conversations_12_head_guard: a head moved outside pgconvo's code names a
-- message of its own conversation, in replica mode too (which skips the
-- foreign key), and every update outside pgconvo's code is the writer's
-- owner's; pgconvo's own updates skip it in its WHEN.
CREATE OR REPLACE TRIGGER conversations_12_head_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.conversations_head_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_12_head_guard;
