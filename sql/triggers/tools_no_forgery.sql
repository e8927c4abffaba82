-- tools_no_forgery: the allowlist is written only through register_tool
-- (refuse_forgery), which checks each schema; any other role, whatever its
-- privileges, gets CV005.
CREATE OR REPLACE TRIGGER tools_no_forgery
    BEFORE INSERT ON convo.tools
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_no_forgery;
