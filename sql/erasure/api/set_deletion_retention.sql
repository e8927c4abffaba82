-- set_deletion_retention: the database's retention period for deleted
-- conversations, convo_admin's: erase_due erases a deleted conversation
-- once this long has passed since its deletion, reckoned at each sweep (a
-- shorter period applies to conversations deleted before it was set, too).
-- 0 erases at the next sweep. NULL, a negative period or one over 100
-- years (which no sweep could reckon with: the time it names is out of
-- range) is CV011. Who set it, and when, is kept beside it.
CREATE OR REPLACE FUNCTION convo.set_deletion_retention(p_period interval)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    IF p_period IS NULL OR p_period < interval '0' OR p_period > interval '100 years' THEN
        RAISE EXCEPTION 'the retention period is an interval from 0 to 100 years, not %', coalesce(p_period::text, 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('period %s', coalesce(p_period::text, 'NULL'));
    END IF;
    INSERT INTO convo_private.settings (deletion_retention, set_by) VALUES (p_period, convo_private.caller())
    ON CONFLICT (singleton) DO UPDATE
       SET deletion_retention = excluded.deletion_retention, set_by = excluded.set_by, set_at = excluded.set_at;
END;
$$;

COMMENT ON FUNCTION convo.set_deletion_retention(interval) IS
    'Set how long a deleted conversation is kept before erase_due erases it (0: at the next sweep); convo_admin''s.';
