-- 0012_notify_switch down: reverses 0012_notify_switch.up.sql.

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

-- conversation_head_log_notify: every head-log row is sent to channel convo_head (ids, seq, reason).
CREATE OR REPLACE TRIGGER conversation_head_log_notify
    AFTER INSERT ON convo.conversation_head_log
    FOR EACH ROW EXECUTE FUNCTION convo_private.notify_head_move();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_notify;

-- tool_effect_events_notify: every effect transition is sent to channel convo_effect (ids, seq, states).
CREATE OR REPLACE TRIGGER tool_effect_events_notify
    AFTER INSERT ON convo.tool_effect_events
    FOR EACH ROW EXECUTE FUNCTION convo_private.notify_effect_event();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_notify;

-- tool_receipts_notify: a receipt's filing, fill and settlement are sent to channel convo_effect (id, status).
CREATE OR REPLACE TRIGGER tool_receipts_notify
    AFTER INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW EXECUTE FUNCTION convo_private.notify_receipt();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_notify;

SELECT convo_private.apply_grants();

-- Reverse the table changes here, below the objects.

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
