-- notifies: whether the changes of this transaction are sent as live-update
-- notifications (pg_notify): the database's switch (set_live_updates, on
-- until a DBA sets it) and the session's convo.notify (off silences that
-- session alone). The one test of every place that notifies: log_head_move,
-- effect_event and notify_receipt, each running as the owner role. A quoted
-- body: Citus cannot send a SQL-standard one that holds a subquery to its
-- workers.
CREATE OR REPLACE FUNCTION convo_private.notifies()
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT current_setting('convo.notify', true) IS DISTINCT FROM 'off'
       AND coalesce((SELECT s.live_updates FROM convo_private.settings s), true)
$$;
