-- settle_receipt: apply_receipt's and fail_receipt's one step, told apart
-- by p_status: a pending receipt to 'applied' (its arguments valid, with
-- a result reference, p_ref, and a 2xx status) or to 'failed' (an error
-- code, p_ref, and a 4xx or 5xx status), found among the session owner's
-- receipts (receipt_ref). An exact repeat is a no-op; a receipt settled
-- otherwise is CV006.
CREATE OR REPLACE FUNCTION convo_private.settle_receipt(
    p_receipt_id  uuid,
    p_status      text,
    p_http_status int,
    p_ref         text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_applied boolean := p_status = 'applied';
    v_ref     text := CASE WHEN v_applied THEN 'p_result_ref' ELSE 'p_error_code' END;
    v_now     timestamptz;  -- a value, not clock_timestamp() in the UPDATE: Citus refuses a volatile function there
BEGIN
    IF p_ref IS NULL OR p_ref = '' OR p_http_status IS NULL
       OR v_applied AND p_http_status NOT BETWEEN 200 AND 299
       OR NOT v_applied AND p_http_status NOT BETWEEN 400 AND 599 THEN
        RAISE EXCEPTION '% and a % p_http_status are required', v_ref, (CASE WHEN v_applied THEN '2xx' ELSE '4xx or 5xx' END)
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_ref) > convo.max_ref_length() THEN
        RAISE EXCEPTION '% is longer than % characters', v_ref, convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = p_status AND v_receipt.http_status = p_http_status
       AND (CASE WHEN v_applied THEN v_receipt.result_ref ELSE v_receipt.error_code END) = p_ref THEN
        RETURN;
    END IF;
    IF v_applied AND (v_receipt.status <> 'pending' OR v_receipt.arguments_valid IS NOT TRUE) THEN
        RAISE EXCEPTION 'receipt % is % with % arguments: only a pending receipt with valid arguments is applied',
                p_receipt_id, v_receipt.status,
                CASE v_receipt.arguments_valid WHEN true THEN 'valid' WHEN false THEN 'invalid' ELSE 'no' END
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    IF v_receipt.status <> 'pending' THEN
        RAISE EXCEPTION 'receipt % is %: only a pending receipt fails', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = p_status, http_status = p_http_status, settled_at = v_now,
           result_ref = CASE WHEN v_applied THEN p_ref ELSE r.result_ref END,
           error_code = CASE WHEN v_applied THEN r.error_code ELSE p_ref END
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, p_status, v_applied OR v_receipt.arguments IS NOT NULL);
END;
$$;
