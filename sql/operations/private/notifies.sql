-- notifies: whether the changes of this transaction are sent as live-update
-- notifications (pg_notify): the database's switch (set_live_updates, on
-- until a DBA sets it) and the session's convo.notify (off silences that
-- session alone). The one test of every place that notifies: log_head_move,
-- effect_event and notify_receipt, each running as the owner role.
-- PL/pgSQL, not SQL: PostgreSQL 15 plans a SQL function's body again in
-- every transaction that calls it from PL/pgSQL (every write, in the
-- application's one call a transaction), where PL/pgSQL keeps its plan for
-- the session.
CREATE OR REPLACE FUNCTION convo_private.notifies()
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN current_setting('convo.notify', true) IS DISTINCT FROM 'off'
           AND coalesce((SELECT s.live_updates FROM convo_private.settings s), true);
END;
$$;
