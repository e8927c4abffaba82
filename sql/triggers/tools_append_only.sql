-- tools_append_only: a registered tool version is frozen (CV005); other settings make the next version.
CREATE OR REPLACE TRIGGER tools_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tools
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_append_only;
