-- begin_receipt: the receipt row first, in pending, before the model fills
-- any argument: one allowlisted tool, its version frozen here. A repeat with
-- the same owner and key returns the first row (created = false); the same
-- key with another tool or request raises CV009. A key whose receipt was
-- erased (erase_owner emptied its request and its digest) raises CV009 for
-- any request, in words that name no request: nothing is compared with a
-- guess. A convo_app session files receipts only for the owner it set
-- (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.begin_receipt(
    p_owner_id        text,
    p_idempotency_key text,
    p_tool_name       text,
    p_request         jsonb DEFAULT '{}')
RETURNS TABLE (receipt_id uuid, status text, http_status int, error_code text, result_ref text, created boolean)
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
    v_tool    convo.tools;
    v_digest  text;
    v_receipt convo.tool_receipts;
    v_now     timestamptz;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' OR p_request IS NULL OR p_tool_name IS NULL THEN
        RAISE EXCEPTION 'p_owner_id, p_tool_name and p_request are required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, tool %s, key %s', coalesce(p_owner_id, 'NULL'),
                                                     coalesce(p_tool_name, 'NULL'), coalesce(p_idempotency_key, 'NULL'));
    END IF;
    PERFORM convo_private.check_owner(p_owner_id, 'create receipts');
    -- Held against an owner-wide erasure running meanwhile (hold_owner).
    PERFORM convo_private.hold_owner(p_owner_id, false);
    IF p_idempotency_key IS NULL OR length(p_idempotency_key) NOT BETWEEN 8 AND 255 THEN
        RAISE EXCEPTION 'an idempotency key is 8 to 255 characters'
            USING ERRCODE = 'CV011', DETAIL = format('key %s', coalesce(quote_literal(p_idempotency_key), 'NULL'));
    END IF;
    PERFORM convo_private.check_size('p_request', p_request, convo.max_request_bytes());
    -- Keyed (keyed_digest): the digest outlives an erasure of the request.
    v_digest := convo_private.keyed_digest(encode(sha256(convert_to(p_request::text, 'UTF8')), 'hex'));

    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    IF NOT FOUND THEN
        v_tool := convo_private.tool_ref(p_tool_name);
        v_now := clock_timestamp();
        INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest,
                                         created_at, deadline_at)
        VALUES (gen_random_uuid(), p_owner_id, p_idempotency_key, v_tool.name, v_tool.version, p_request, v_digest,
                v_now, v_now + v_tool.deadline)
        ON CONFLICT (owner_id, idempotency_key) DO NOTHING
        RETURNING * INTO v_receipt;
        IF FOUND THEN
            PERFORM convo_private.notify_receipt(v_receipt.id, 'pending', false);
            RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                                v_receipt.result_ref, true;
            RETURN;
        END IF;
        -- Another transaction filed the same key first: answer as a repeat.
        SELECT * INTO v_receipt FROM convo.tool_receipts r
         WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    END IF;
    IF v_receipt.request_digest IS NULL THEN
        RAISE EXCEPTION 'idempotency key % belongs to an erased request; use a new key', p_idempotency_key
            USING ERRCODE = 'CV009',
                  DETAIL = format('receipt %s, owner %s, erased', v_receipt.id, p_owner_id),
                  HINT = 'A receipt''s request is not compared with anything once erased: file the request again under a new key.';
    END IF;
    IF v_receipt.tool_name <> p_tool_name OR v_receipt.request_digest <> v_digest THEN
        RAISE EXCEPTION 'idempotency key % is already used for a different request', p_idempotency_key
            USING ERRCODE = 'CV009',
                  DETAIL = format('receipt %s, owner %s, tool %s', v_receipt.id, p_owner_id, v_receipt.tool_name);
    END IF;
    RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                        v_receipt.result_ref, false;
END;
$$;

COMMENT ON FUNCTION convo.begin_receipt(text, text, text, jsonb) IS
    'File a receipt (pending) before a route-initiated mutation; a repeat of the key returns the first row (CV009 once its request was erased).';
