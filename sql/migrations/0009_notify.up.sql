-- 0009_notify: live updates: pg_notify on every head-log row (convo_head) and every effect
-- or receipt transition (convo_effect), sent by the transaction that writes the row.

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

-- notify_effect_event: sends every transition of an effect (each row of
-- tool_effect_events, its creation included) to channel convo_effect, from
-- the transaction that made it (a rolled-back transition is never heard).
-- The payload holds ids, seq and states only, for listeners of any owner:
-- never arguments, evidence, references, error codes or the actor.
CREATE OR REPLACE FUNCTION convo_private.notify_effect_event()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('convo_effect', json_build_object(
        'kind', 'effect', 'conversation_id', NEW.conversation_id, 'effect_id', NEW.effect_id,
        'seq', NEW.seq, 'from_state', NEW.from_state, 'state', NEW.to_state)::text);
    RETURN NULL;
END;
$$;

-- notify_head_move: sends every head-log row, whoever wrote it (the API or a
-- direct UPDATE logged as direct_update), to channel convo_head, from the
-- transaction that moved the head: pg_notify is transactional, so a move
-- that rolls back is never heard. LISTEN is not owner-scoped (any role that
-- may connect to the database may listen), so the payload holds ids, seq and
-- reason only: never content, the owner or who moved it.
CREATE OR REPLACE FUNCTION convo_private.notify_head_move()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('convo_head', json_build_object(
        'conversation_id', NEW.conversation_id, 'seq', NEW.seq, 'head_message_id', NEW.head_message_id,
        'previous_head_id', NEW.previous_head_id, 'reason', NEW.reason)::text);
    RETURN NULL;
END;
$$;

-- notify_receipt: sends a receipt's filing, its fill and its settlement
-- (applied or failed) to channel convo_effect, from the transaction that
-- made them (a rolled-back change is never heard). Any other UPDATE (an
-- erasure, an identical row) sends nothing. The payload holds the receipt's
-- id, status and whether it is filled: never its owner, key, request or
-- arguments, since listeners may belong to any owner.
CREATE OR REPLACE FUNCTION convo_private.notify_receipt()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status
       AND (NEW.arguments IS NULL) = (OLD.arguments IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('convo_effect', json_build_object(
        'kind', 'receipt', 'receipt_id', NEW.id, 'state', NEW.status,
        'filled', NEW.arguments IS NOT NULL)::text);
    RETURN NULL;
END;
$$;

-- package_triggers: every trigger pgconvo puts on its tables, by what it
-- guards: append_only (refuse_change, refuse_forgery), head_log (the head
-- log's writer and the guard that names direct updates) and rule (the tree,
-- the state machines, the ledger, the notifications of convo_head and
-- convo_effect). self_check requires each present and
-- ENABLE ALWAYS, and no other trigger on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversation_head_log', 'conversation_head_log_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_no_forgery', 'append_only'),
        ('conversations', 'conversations_no_delete', 'append_only'),
        ('conversations', 'conversations_erasure_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_fixed', 'append_only'),
        ('live_path', 'live_path_no_forgery', 'append_only'),
        ('generations', 'generations_no_delete', 'append_only'),
        ('message_parts', 'message_parts_append_only', 'append_only'),
        ('message_parts', 'message_parts_no_forgery', 'append_only'),
        ('message_parts', 'message_parts_erasure_only', 'append_only'),
        ('messages', 'messages_append_only', 'append_only'),
        ('messages', 'messages_erasure_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_append_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_erasure_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_no_delete', 'append_only'),
        ('tool_effects', 'tool_effects_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_delete', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_forgery', 'append_only'),
        ('erasures', 'erasures_append_only', 'append_only'),
        ('erasures', 'erasures_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_no_forgery', 'append_only'),
        ('tools', 'tools_append_only', 'append_only'),
        ('tools', 'tools_no_forgery', 'append_only'),
        ('conversations', 'conversations_guard', 'head_log'),
        ('conversations', 'conversations_head_log', 'head_log'),
        ('generations', 'generations_transition', 'rule'),
        ('message_parts', 'message_parts_check', 'rule'),
        ('message_parts', 'message_parts_record_tool_call', 'rule'),
        ('messages', 'messages_fill_tree', 'rule'),
        ('messages', 'messages_split_parts', 'rule'),
        ('tool_effects', 'tool_effects_log', 'rule'),
        ('tool_effects', 'tool_effects_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_transition', 'rule'),
        ('conversation_head_log', 'conversation_head_log_notify', 'rule'),
        ('tool_effect_events', 'tool_effect_events_notify', 'rule'),
        ('tool_receipts', 'tool_receipts_notify', 'rule')) AS t (table_name, trigger_name, guards);
END;

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

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
