-- register_tool_in: register_tool's work on the allowlist stored in
-- p_tools: convo.tools on one server; on a distributed database, where
-- convo.tools is on every node, each node's copy of it, written by a call
-- on that node (route_register_tool) in one transaction. The arguments
-- checked, then, under a lock on the tool's name, the same settings return
-- the latest version and others make the next one.
CREATE OR REPLACE FUNCTION convo_private.register_tool_in(
    p_tools             text,
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
AS $$
DECLARE
    v_latest convo.tools;
    v_n      bigint;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$' THEN
        RAISE EXCEPTION 'invalid tool name %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', coalesce(quote_literal(p_name), 'NULL')),
                  HINT = 'A tool name is 1 to 128 characters of A-Z, a-z, 0-9, _, . and -, not starting with a digit.';
    END IF;
    IF p_effectful IS NULL OR p_args_schema IS NULL OR p_deadline IS NULL OR p_idempotency_scope IS NULL THEN
        RAISE EXCEPTION 'p_effectful, p_args_schema, p_idempotency_scope and p_deadline are required'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name);
    END IF;
    IF p_idempotency_scope NOT IN ('tool_call', 'conversation_args', 'fork_args') THEN
        RAISE EXCEPTION 'unknown idempotency scope %', quote_literal(p_idempotency_scope)
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name), HINT = 'Scopes are tool_call, conversation_args and fork_args.';
    END IF;
    IF p_deadline <= interval '0' THEN
        RAISE EXCEPTION 'the deadline must be positive' USING ERRCODE = 'CV011', DETAIL = format('tool %s, deadline %s', p_name, p_deadline);
    END IF;
    PERFORM convo_private.check_size('the argument schema', p_args_schema, convo.max_request_bytes());
    PERFORM convo_private.check_args_schema(p_args_schema);
    IF (p_amount_arg IS NOT NULL OR p_currency_arg IS NOT NULL) AND NOT p_effectful THEN
        RAISE EXCEPTION 'only an effectful tool has amount and currency arguments'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name);
    END IF;
    IF p_amount_arg IS NOT NULL AND NOT coalesce(p_args_schema -> 'properties' ? p_amount_arg, false)
       OR p_currency_arg IS NOT NULL AND NOT coalesce(p_args_schema -> 'properties' ? p_currency_arg, false) THEN
        RAISE EXCEPTION 'the amount and currency arguments must be properties of the schema'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s, amount %s, currency %s', p_name, p_amount_arg, p_currency_arg);
    END IF;

    -- Versions of one tool are numbered under a lock on its name.
    PERFORM pg_advisory_xact_lock(hashtext('convo.tools'), hashtext(p_name));
    EXECUTE format('SELECT * FROM %s t WHERE t.name = $1 ORDER BY t.version DESC LIMIT 1', p_tools)
       INTO v_latest USING p_name;
    IF v_latest.name IS NOT NULL AND v_latest.effectful = p_effectful AND v_latest.args_schema::text = p_args_schema::text
       AND v_latest.idempotency_scope = p_idempotency_scope
       -- '1 day' and '24 hours' compare equal but differ across a DST change: compare as written.
       AND v_latest.deadline::text = p_deadline::text
       AND v_latest.amount_arg IS NOT DISTINCT FROM p_amount_arg
       AND v_latest.currency_arg IS NOT DISTINCT FROM p_currency_arg THEN
        RETURN v_latest.version;
    END IF;
    -- Under REPEATABLE READ a version another transaction committed while
    -- this one waited for the lock is invisible here: ON CONFLICT then fails
    -- with a retryable 40001, never a 23505.
    EXECUTE format('INSERT INTO %s (name, version, effectful, args_schema, idempotency_scope, deadline, amount_arg, currency_arg)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                    ON CONFLICT (name, version) DO NOTHING', p_tools)
      USING p_name, coalesce(v_latest.version, 0) + 1, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
            p_amount_arg, p_currency_arg;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n = 0 THEN
        RAISE EXCEPTION 'tool % got a new version from another transaction: retry', p_name
            USING ERRCODE = 'serialization_failure', DETAIL = format('tool %s, version %s', p_name, coalesce(v_latest.version, 0) + 1);
    END IF;
    RETURN coalesce(v_latest.version, 0) + 1;
END;
$$;

