-- advance_identity: moves the sequence behind an identity column past
-- p_past, never back, so that rows an import kept with their exported
-- numbers are followed by larger ones (head_history orders by seq). ALTER
-- SEQUENCE holds off every nextval until the transaction ends, so the value
-- is read again under that lock before the sequence moves; an import that
-- needs no move takes no lock.
CREATE OR REPLACE FUNCTION convo_private.advance_identity(p_table text, p_column text, p_past bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq  text := pg_get_serial_sequence(p_table, p_column);
    v_last bigint;
BEGIN
    IF p_past IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('SELECT last_value FROM %s', v_seq) INTO v_last;
    IF v_last > p_past THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER SEQUENCE %s NO CYCLE', v_seq); -- the lock, no change
    EXECUTE format('SELECT last_value FROM %s', v_seq) INTO v_last;
    IF v_last <= p_past THEN
        EXECUTE format('ALTER SEQUENCE %s RESTART WITH %s', v_seq, p_past + 1);
    END IF;
END;
$$;
