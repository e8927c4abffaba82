-- expire_receipts_in: expire_receipts' sweep over the receipts stored in
-- p_receipts: convo.tool_receipts on one server; on a distributed
-- database, each of a node's shards of it (expire_receipts_on_node). Each
-- pending receipt past its deadline at p_now fails with 504
-- deadline_exceeded; returns how many.
CREATE OR REPLACE FUNCTION convo_private.expire_receipts_in(p_receipts text, p_now timestamptz)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count int;
BEGIN
    EXECUTE format('
    WITH expired AS (
        UPDATE %s r
           SET status = ''failed'', http_status = 504, error_code = ''deadline_exceeded'', settled_at = $2
         WHERE r.status = ''pending'' AND r.deadline_at < $1
        RETURNING r.id, r.arguments IS NOT NULL AS filled)
    SELECT count(*)::int
      FROM expired e, LATERAL (SELECT convo_private.notify_receipt(e.id, ''failed'', e.filled)) n', p_receipts)
       INTO v_count USING p_now, clock_timestamp();
    RETURN v_count;
END;
$$;
