-- check_size: raises CV010 when a JSON value is larger than its cap (in
-- bytes of jsonb's text form), naming what it was; NULL passes.
CREATE OR REPLACE FUNCTION convo_private.check_size(p_what text, p_value jsonb, p_cap int)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NOT NULL AND octet_length(p_value::text) > p_cap THEN
        RAISE EXCEPTION '% is larger than % bytes', p_what, p_cap
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', p_what, octet_length(p_value::text));
    END IF;
END;
$$;
