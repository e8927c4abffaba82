-- register_tool_here: register_tool_on_node on the coordinator's own copy
-- of convo.tools, as the owner role: a local write, which opens no
-- connection. route_register_tool calls it beside the workers' calls.
CREATE OR REPLACE FUNCTION convo_node.register_tool_here(
    p_name              text,
    p_effectful         boolean,
    p_args_schema       jsonb,
    p_idempotency_scope text,
    p_deadline          interval,
    p_amount_arg        text,
    p_currency_arg      text)
RETURNS int
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT convo_node.register_tool_on_node(NULL, p_name, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
                                            p_amount_arg, p_currency_arg)
$$;
