-- receipt_ref: the receipt a call names, locked for its transition; CV002
-- if there is none or the caller may not write for its owner. The owner is
-- checked first, without a lock, and the lock is taken by the receipt's key
-- (owner, id): another owner's receipt is never locked or waited for. A
-- session with its owner set looks among that owner's receipts only, by
-- their key (on a distributed database, on the owner's node, where the
-- routers send the call); one without (convo_admin's) by id.
CREATE OR REPLACE FUNCTION convo_private.receipt_ref(p_receipt_id uuid)
RETURNS convo.tool_receipts
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts;
    v_owner   text;
BEGIN
    IF p_receipt_id IS NULL THEN
        RAISE EXCEPTION 'p_receipt_id is required' USING ERRCODE = 'CV011', DETAIL = 'receipt NULL';
    END IF;
    v_owner := nullif(current_setting('convo.owner_id', true), '');
    IF v_owner IS NULL THEN
        SELECT r.owner_id INTO v_owner FROM convo.tool_receipts r WHERE r.id = p_receipt_id;
    END IF;
    IF NOT convo_private.writes_owner(v_owner) THEN
        v_owner := NULL;
    END IF;
    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = v_owner AND r.id = p_receipt_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt % does not exist', p_receipt_id
            USING ERRCODE = 'CV002', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    RETURN v_receipt;
END;
$$;
