-- register_tool: the allowlist, kept by the DBA. A version once registered
-- is frozen: the same settings return the latest version, other settings
-- make the next one. The schema is checked here (check_args_schema), so a
-- keyword outside the supported subset is refused and never silently ignored.
CREATE OR REPLACE FUNCTION convo.register_tool(
    p_name              text,
    p_effectful         boolean,
    p_args_schema       jsonb,
    p_idempotency_scope text DEFAULT 'tool_call',
    p_deadline          interval DEFAULT '20 seconds',
    p_amount_arg        text DEFAULT NULL,
    p_currency_arg      text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    RETURN convo_private.register_tool_in('convo.tools', p_name, p_effectful, p_args_schema, p_idempotency_scope,
                                          p_deadline, p_amount_arg, p_currency_arg);
END;
$$;

COMMENT ON FUNCTION convo.register_tool(text, boolean, jsonb, text, interval, text, text) IS
    'Allowlist a tool: frozen argument schema (JSON Schema subset), idempotency scope, deadline; returns its version.';
