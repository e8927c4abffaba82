-- erase_receipts: erase_owner's part on the owner's node: its checks
-- (check_erase_owner), the owner held against anything new of the owner's
-- meanwhile (hold_owner, as on one server), and the owner's receipts
-- erased and recorded (erase_content with no conversation).
CREATE OR REPLACE FUNCTION convo_node.erase_receipts(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.check_erase_owner(p_owner_id, p_reason);
    PERFORM convo_private.hold_owner(p_owner_id, true);
    RETURN QUERY SELECT * FROM convo_private.erase_content(p_owner_id, NULL, p_reason);
END;
$$;
