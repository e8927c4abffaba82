-- epoch_time: a source file's time, epoch seconds as a JSON number, as a
-- timestamptz to the microsecond (computed in numeric, so no float
-- rounding); a value above p_ms_above (when given) is read as
-- milliseconds. NULL when it is not a number or lies outside years 1 to 9999.
CREATE OR REPLACE FUNCTION convo_private.epoch_time(p_value jsonb, p_ms_above numeric)
RETURNS timestamptz
LANGUAGE sql
IMMUTABLE
RETURN (SELECT CASE WHEN x.s BETWEEN -62135596800 AND 253402300799
                    THEN timestamptz 'epoch' + round(x.s * 1000000)::float8 * interval '1 microsecond' END
          FROM (SELECT CASE WHEN p_ms_above IS NOT NULL AND p_value::numeric > p_ms_above
                            THEN p_value::numeric / 1000 ELSE p_value::numeric END AS s
                 WHERE jsonb_typeof(p_value) = 'number') x);
