-- notify_receipt: sends a receipt's filing, its fill and its settlement
-- (applied or failed) to channel convo_effect, from the transaction that
-- made them (a rolled-back change is never heard), when notifies says so.
-- begin_receipt, fill_receipt, apply_receipt, fail_receipt and
-- expire_receipts call it for each receipt they change; an erasure or a
-- repeat sends nothing. The payload holds the receipt's id, status and
-- whether it is filled: never its owner, key, request or arguments, since
-- listeners may belong to any owner.
CREATE OR REPLACE FUNCTION convo_private.notify_receipt(p_receipt_id uuid, p_status text, p_filled boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF convo_private.notifies() THEN
        PERFORM pg_notify('convo_effect', json_build_object(
            'kind', 'receipt', 'receipt_id', p_receipt_id, 'state', p_status, 'filled', p_filled)::text);
    END IF;
END;
$$;
