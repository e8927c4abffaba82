-- check_expected_head: the compare-and-set of a write. When the caller names
-- the head it expects and the head has moved, CV001 names the current head.
CREATE OR REPLACE FUNCTION convo_private.check_expected_head(p_conversation_id uuid, p_expected_head uuid, p_current_head uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_expected_head IS NOT NULL AND p_expected_head IS DISTINCT FROM p_current_head THEN
        RAISE EXCEPTION 'the head of conversation % has moved', p_conversation_id
            USING ERRCODE = 'CV001',
                  DETAIL = format('expected head %s, current head %s', p_expected_head, coalesce(p_current_head::text, 'none'));
    END IF;
END;
$$;
