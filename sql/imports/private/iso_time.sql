-- iso_time: a source file's time as an ISO 8601 string (LibreChat's
-- createdAt, as JavaScript's toISOString writes it) as a timestamptz:
-- YYYY-MM-DD, optionally Thh:mm[:ss[.fraction]] and Z or an offset; without
-- an offset, UTC (never the session's time zone). NULL when it is not a
-- string of that form or names no instant (month 13, 30 February, year 0):
-- the cast's own errors are caught, so no other form the cast accepts
-- ('now', 'yesterday', 'May 1 2024') is read.
CREATE OR REPLACE FUNCTION convo_private.iso_time(p_value jsonb)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_text text := CASE WHEN jsonb_typeof(p_value) = 'string' THEN p_value #>> '{}' END;
    v_part text[] := regexp_match(v_text,
        '^(\d{4}-\d{2}-\d{2})(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?$');
BEGIN
    IF v_part IS NULL OR (v_part[2] IS NULL AND v_part[5] IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    IF v_part[5] IS NULL THEN
        RETURN v_text::timestamp AT TIME ZONE 'UTC';
    END IF;
    RETURN v_text::timestamptz;
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END;
$$;
