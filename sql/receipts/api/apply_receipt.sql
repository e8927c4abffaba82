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
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_now     timestamptz;
BEGIN
    IF p_result_ref IS NULL OR p_result_ref = '' OR p_http_status IS NULL OR p_http_status NOT BETWEEN 200 AND 299 THEN
        RAISE EXCEPTION 'p_result_ref and a 2xx p_http_status are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_result_ref) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_result_ref is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = 'applied' AND v_receipt.result_ref = p_result_ref AND v_receipt.http_status = p_http_status THEN
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' OR v_receipt.arguments_valid IS NOT TRUE THEN
        RAISE EXCEPTION 'receipt % is % with % arguments: only a pending receipt with valid arguments is applied',
                p_receipt_id, v_receipt.status,
                CASE v_receipt.arguments_valid WHEN true THEN 'valid' WHEN false THEN 'invalid' ELSE 'no' END
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = 'applied', result_ref = p_result_ref, http_status = p_http_status, settled_at = v_now
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, 'applied', true);
END;
$$;

COMMENT ON FUNCTION convo.apply_receipt(uuid, text, int) IS
    'Mark a pending, validly filled receipt applied; run it in the mutation''s own transaction to make the two atomic.';
