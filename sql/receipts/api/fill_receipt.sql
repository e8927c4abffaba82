-- fill_receipt: the model's arguments, checked against the tool version
-- frozen at begin_receipt (422 invalid_arguments), then against the route's
-- own values: every top-level key of p_expected must match (422
-- arg_mismatch, a model retargeting a ticket). Past the deadline the receipt
-- fails with 504 deadline_exceeded. The arguments are kept either way.
CREATE OR REPLACE FUNCTION convo.fill_receipt(p_receipt_id uuid, p_arguments jsonb, p_expected jsonb DEFAULT '{}')
RETURNS TABLE (status text, http_status int, error_code text)
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
    v_code    text;
    v_now     timestamptz;
BEGIN
    IF p_arguments IS NULL OR p_expected IS NULL OR jsonb_typeof(p_expected) <> 'object' THEN
        RAISE EXCEPTION 'p_arguments and p_expected (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    PERFORM convo_private.check_size('p_arguments', p_arguments, convo.max_request_bytes());
    PERFORM convo_private.check_size('p_expected', p_expected, convo.max_request_bytes());
    -- A repeat is the same text (canonical arguments): 500 and 500.0 differ.
    IF v_receipt.arguments::text = p_arguments::text AND v_receipt.expected::text = p_expected::text THEN
        RETURN QUERY SELECT v_receipt.status, v_receipt.http_status, v_receipt.error_code;
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' OR v_receipt.arguments IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % is % with its arguments filled: it is filled once', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;

    v_now := clock_timestamp();
    v_code := CASE
        WHEN v_now > v_receipt.deadline_at THEN 'deadline_exceeded'
        ELSE convo_private.receipt_arguments_error(v_receipt.tool_name, v_receipt.tool_version, p_arguments, p_expected)
    END;
    UPDATE convo.tool_receipts r
       SET arguments = p_arguments, expected = p_expected, arguments_valid = (v_code IS NULL),
           filled_at = v_now,
           status = CASE WHEN v_code IS NULL THEN 'pending' ELSE 'failed' END,
           http_status = CASE WHEN v_code IS NULL THEN NULL WHEN v_code = 'deadline_exceeded' THEN 504 ELSE 422 END,
           error_code = v_code,
           settled_at = CASE WHEN v_code IS NOT NULL THEN v_now END
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id
    RETURNING r.status, r.http_status, r.error_code INTO v_receipt.status, v_receipt.http_status, v_receipt.error_code;
    PERFORM convo_private.notify_receipt(p_receipt_id, v_receipt.status, true);
    RETURN QUERY SELECT v_receipt.status, v_receipt.http_status, v_receipt.error_code;
END;
$$;

COMMENT ON FUNCTION convo.fill_receipt(uuid, jsonb, jsonb) IS
    'Check a receipt''s arguments: frozen schema (422 invalid_arguments), then the route''s values (422 arg_mismatch).';
