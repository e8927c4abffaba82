-- notify_receipt: sends a receipt's filing, its fill and its settlement
-- (applied or failed) to channel convo_effect, from the transaction that
-- made them (a rolled-back change is never heard), unless the database's
-- live updates (set_live_updates) or the session's convo.notify are off.
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
    IF current_setting('convo.notify', true) IS DISTINCT FROM 'off'
       AND coalesce((SELECT s.live_updates FROM convo_private.settings s), true) THEN
        PERFORM pg_notify('convo_effect', json_build_object(
            'kind', 'receipt', 'receipt_id', p_receipt_id, 'state', p_status, 'filled', p_filled)::text);
    END IF;
END;
$$;
