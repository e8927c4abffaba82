-- tools_90_append_only: a registered tool version is frozen, for every role.
CREATE OR REPLACE TRIGGER tools_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tools
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_90_append_only;
