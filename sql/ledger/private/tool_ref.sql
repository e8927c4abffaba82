-- tool_ref: the latest registered version of a tool, or CV007: a tool that
-- is not on the allowlist never gets a go-ahead.
CREATE OR REPLACE FUNCTION convo_private.tool_ref(p_name text)
RETURNS convo.tools
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tool convo.tools;
BEGIN
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = p_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tool % is not registered', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'CV007', DETAIL = format('tool %s', p_name),
                  HINT = 'A DBA registers tools with convo.register_tool.';
    END IF;
    RETURN v_tool;
END;
$$;
