-- notify_receipt: sends a receipt's filing, its fill and its settlement
-- (applied or failed) to channel convo_effect, from the transaction that
-- made them (a rolled-back change is never heard). Any other UPDATE (an
-- erasure, an identical row) sends nothing. The payload holds the receipt's
-- id, status and whether it is filled: never its owner, key, request or
-- arguments, since listeners may belong to any owner.
CREATE OR REPLACE FUNCTION convo_private.notify_receipt()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status
       AND (NEW.arguments IS NULL) = (OLD.arguments IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('convo_effect', json_build_object(
        'kind', 'receipt', 'receipt_id', NEW.id, 'state', NEW.status,
        'filled', NEW.arguments IS NOT NULL)::text);
    RETURN NULL;
END;
$$;
