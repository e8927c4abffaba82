-- unreadable_row: the first row of an export document that its table's
-- column types refuse (a value too long, an interval or time that does not
-- parse), named as import_conversation names a row: its place in the
-- document and its id, seq or key; NULL when every row reads. A value that
-- fails its cast fails it with no table or row in the server's error, so a
-- refused restore reads the document again, row by row, on that path only.
CREATE OR REPLACE FUNCTION convo_private.unreadable_row(p_export jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_place record;
    v_row   record;
BEGIN
    BEGIN
        PERFORM jsonb_populate_record(NULL::convo.conversations, p_export -> 'conversation');
    EXCEPTION WHEN data_exception THEN
        RETURN ', conversation';
    END;
    FOR v_place IN
        SELECT * FROM convo_private.export_places() p WHERE jsonb_typeof(p_export -> p.key) = 'array'
    LOOP
        FOR v_row IN SELECT j.elem, j.n FROM jsonb_array_elements(p_export -> v_place.key) WITH ORDINALITY j (elem, n) LOOP
            BEGIN
                EXECUTE format('SELECT jsonb_populate_record(NULL::convo.%I, $1)', v_place.tab) USING v_row.elem;
            EXCEPTION WHEN data_exception THEN
                RETURN format(', %s row %s of the array (%s)', v_place.key, v_row.n,
                              convo_private.export_row_name(v_row.elem));
            END;
        END LOOP;
    END LOOP;
    RETURN NULL;
END;
$$;
