-- fail_receipt: pending to failed, with an HTTP-style status and an error
-- code (the fill failed upstream, the mutation was refused, ...). An exact
-- repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.fail_receipt(p_receipt_id uuid, p_http_status int, p_error_code text)
RETURNS void
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
    PERFORM convo_private.settle_receipt(p_receipt_id, 'failed', p_http_status, p_error_code);
END;
$$;

COMMENT ON FUNCTION convo.fail_receipt(uuid, int, text) IS 'Mark a pending receipt failed with an HTTP-style status and error code.';
