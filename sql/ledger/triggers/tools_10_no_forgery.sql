-- tools_10_no_forgery: only register_tool (or a superuser) adds to the
-- allowlist.
CREATE OR REPLACE TRIGGER tools_10_no_forgery
    BEFORE INSERT ON convo.tools
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_10_no_forgery;
