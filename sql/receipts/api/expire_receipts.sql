-- expire_receipts: the sweeper: pending receipts past their tool's deadline
-- fail with 504 deadline_exceeded, so none stays pending forever. Returns
-- how many it failed.
CREATE OR REPLACE FUNCTION convo.expire_receipts(p_now timestamptz DEFAULT clock_timestamp())
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
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'p_now is required' USING ERRCODE = 'CV011', DETAIL = 'p_now NULL';
    END IF;
    RETURN convo_private.expire_receipts_in('convo.tool_receipts', p_now);
END;
$$;

COMMENT ON FUNCTION convo.expire_receipts(timestamptz) IS
    'Fail pending receipts past their tool''s deadline with 504 deadline_exceeded; returns the count.';
