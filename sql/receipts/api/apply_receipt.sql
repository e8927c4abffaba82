-- apply_receipt: pending, with validated arguments, to applied. Call it in
-- the same transaction as the mutation itself to make the two atomic: both
-- commit, or neither does. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.apply_receipt(p_receipt_id uuid, p_result_ref text, p_http_status int DEFAULT 201)
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
    PERFORM convo_private.settle_receipt(p_receipt_id, 'applied', p_http_status, p_result_ref);
END;
$$;

COMMENT ON FUNCTION convo.apply_receipt(uuid, text, int) IS
    'Mark a pending, validly filled receipt applied; run it in the mutation''s own transaction to make the two atomic.';
