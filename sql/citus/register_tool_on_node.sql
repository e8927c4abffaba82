-- register_tool_on_node: register_tool on this node's copy of convo.tools
-- (a reference table, on every node): the allowlist is written a node at a
-- time, each copy by a call on its own node, all in the caller's
-- transaction, where Citus would write every copy over connections as the
-- owner role. NULL where this node holds no copy. p_key only names the
-- node (node_keys).
CREATE OR REPLACE FUNCTION convo_node.register_tool_on_node(
    p_key               uuid,
    p_name              text,
    p_effectful         boolean,
    p_args_schema       jsonb,
    p_idempotency_scope text,
    p_deadline          interval,
    p_amount_arg        text,
    p_currency_arg      text)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET citus.enable_manual_changes_to_shards = on
AS $$
DECLARE
    v_copy text := (SELECT s FROM convo_node.local_shards('convo.tools') s LIMIT 1);
BEGIN
    IF v_copy IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN convo_private.register_tool_in(v_copy, p_name, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
                                          p_amount_arg, p_currency_arg);
END;
$$;
