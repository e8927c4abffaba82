-- set_live_updates: whether this database sends live-update notifications
-- (convo_head, convo_effect), convo_admin's: off, no writer sends one, so
-- no commit takes PostgreSQL's NOTIFY lock (every notifying commit of the
-- cluster takes turns on it: docs/performance.md#notifications), and
-- listeners poll head_history by seq instead. It reaches every session at
-- its next change, pooled ones included (ALTER DATABASE ... SET
-- convo.notify, which needs the database's owner, reaches only new
-- sessions); a session's convo.notify = off still silences that session
-- when it is on. NULL is CV011, writing nothing. Who set it, and when, is
-- kept beside it.
CREATE OR REPLACE FUNCTION convo.set_live_updates(p_on boolean)
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
    IF p_on IS NULL THEN
        RAISE EXCEPTION 'live updates are on (true) or off (false), not NULL'
            USING ERRCODE = 'CV011', DETAIL = 'p_on NULL';
    END IF;
    INSERT INTO convo_private.settings (live_updates, set_by) VALUES (p_on, convo_private.caller())
    ON CONFLICT (singleton) DO UPDATE
       SET live_updates = excluded.live_updates, set_by = excluded.set_by, set_at = excluded.set_at;
END;
$$;

COMMENT ON FUNCTION convo.set_live_updates(boolean) IS
    'Turn the database''s live-update notifications (convo_head, convo_effect) on or off for every session; convo_admin''s.';
