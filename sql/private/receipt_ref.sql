-- receipt_ref: the receipt a call names, locked for its transition; CV002
-- if there is none or the caller may not write for its owner.
CREATE OR REPLACE FUNCTION convo_private.receipt_ref(p_receipt_id uuid)
RETURNS convo.tool_receipts
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts;
BEGIN
    IF p_receipt_id IS NULL THEN
        RAISE EXCEPTION 'p_receipt_id is required' USING ERRCODE = 'CV011', DETAIL = 'receipt NULL';
    END IF;
    SELECT * INTO v_receipt FROM convo.tool_receipts r WHERE r.id = p_receipt_id FOR UPDATE;
    IF NOT FOUND OR NOT convo_private.writes_owner(v_receipt.owner_id) THEN
        RAISE EXCEPTION 'receipt % does not exist', p_receipt_id
            USING ERRCODE = 'CV002', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    RETURN v_receipt;
END;
$$;
