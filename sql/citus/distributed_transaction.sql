-- distributed_transaction: the id Citus gives the caller's distributed
-- transaction, the same on every node it reaches (initiator, number,
-- start): what binds hold_for_new's token to one transaction.
CREATE OR REPLACE FUNCTION convo_node.distributed_transaction()
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id record := get_current_transaction_id();
BEGIN
    IF v_id.transaction_number = 0 THEN
        RAISE EXCEPTION 'this is no distributed transaction' USING ERRCODE = 'CV011';
    END IF;
    RETURN format('%s:%s:%s', v_id.initiator_node_identifier, v_id.transaction_number,
                  (extract(epoch FROM v_id.transaction_stamp) * 1000000)::bigint);
END;
$$;
