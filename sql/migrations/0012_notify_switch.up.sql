-- 0012_notify_switch: convo.notify = off (per database, role or session) stops the
-- notifications, whose commits PostgreSQL serializes, where nobody listens.

-- Act as the owner role: a migrating role that is not a superuser becomes
-- a member for this transaction only (it needs CREATEROLE for that).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- Table changes, written by hand, go here, above the objects that use them.

-- conversation_head_log_notify: every head-log row is sent to channel convo_head (ids, seq, reason).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER conversation_head_log_notify
    AFTER INSERT ON convo.conversation_head_log
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_head_move();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_notify;

-- tool_effect_events_notify: every effect transition is sent to channel convo_effect (ids, seq, states).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER tool_effect_events_notify
    AFTER INSERT ON convo.tool_effect_events
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_effect_event();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_notify;

-- tool_receipts_notify: a receipt's filing, fill and settlement are sent to channel convo_effect (id, status).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER tool_receipts_notify
    AFTER INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_receipt();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_notify;

SELECT convo_private.apply_grants();

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
