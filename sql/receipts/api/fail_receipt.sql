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
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_now     timestamptz;
BEGIN
    IF p_error_code IS NULL OR p_error_code = '' OR p_http_status IS NULL OR p_http_status NOT BETWEEN 400 AND 599 THEN
        RAISE EXCEPTION 'p_error_code and a 4xx or 5xx p_http_status are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = 'failed' AND v_receipt.error_code = p_error_code AND v_receipt.http_status = p_http_status THEN
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' THEN
        RAISE EXCEPTION 'receipt % is %: only a pending receipt fails', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = 'failed', http_status = p_http_status, error_code = p_error_code, settled_at = v_now
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, 'failed', v_receipt.arguments IS NOT NULL);
END;
$$;

COMMENT ON FUNCTION convo.fail_receipt(uuid, int, text) IS 'Mark a pending receipt failed with an HTTP-style status and error code.';
