-- 0027_direct_conversation_insert: a conversation inserted outside
-- pgconvo's code is what create_conversation writes (no head, title or
-- archive state, created and last active now, metadata within the cap), so a
-- direct INSERT cannot place an unlogged title or a backdated conversation.

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

-- conversations_new_guard: a conversation inserted outside pgconvo's code
-- (a superuser's repair, a role granted INSERT, a session that became the
-- owner role) must be what create_conversation writes: no head, title or
-- archive state yet (each arrives with its logged move or change), created
-- and last active now (not backdated or set ahead, which would misplace it in
-- the sidebar), and metadata within the cap. Imports and restores, which keep
-- an export's times and title, are pgconvo's code and skip it in the WHEN.
-- SECURITY DEFINER so that a role granted INSERT alone meets the rule, not
-- a missing privilege on the cap; the DETAIL names the caller.
CREATE OR REPLACE FUNCTION convo_private.conversations_new_guard()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.head_message_id IS NOT NULL OR NEW.title IS NOT NULL OR NEW.archived THEN
        RAISE EXCEPTION 'a new conversation has no head, title or archive state: each is set through the API, which logs it'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', NEW.id, convo_private.caller()),
                  HINT = 'Create it with convo.create_conversation, then append, set_title or archive_conversation.';
    END IF;
    IF NEW.created_at < transaction_timestamp() OR NEW.created_at > clock_timestamp()
       OR NEW.last_activity_at < NEW.created_at OR NEW.last_activity_at > clock_timestamp() THEN
        RAISE EXCEPTION 'a new conversation is created and last active now'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, created_at %s, last_activity_at %s, role %s',
                                  NEW.id, NEW.created_at, NEW.last_activity_at, convo_private.caller()),
                  HINT = 'Leave created_at and last_activity_at to their defaults; an import keeps an export''s times.';
    END IF;
    IF octet_length(NEW.metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010',
                  DETAIL = format('conversation %s: %s bytes', NEW.id, octet_length(NEW.metadata::text));
    END IF;
    RETURN NEW;
END;
$$;

-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), by what it guards: append_only (refuse_change,
-- refuse_forgery), head_log (the conversation's guards and the logging of
-- direct head, title and archive updates) and rule (the tree's and the ledger's guards, the
-- state machines). Each table's triggers are numbered in the order they fire
-- (PostgreSQL fires them by name): 10 who may write, 20 what a row must be,
-- 30 what follows, 90 append-only. self_check requires each present and
-- ENABLE ALWAYS (a view's are enabled as views allow), and no other trigger
-- on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversations', 'conversations_10_guard', 'head_log'),
        ('conversations', 'conversations_11_new_guard', 'head_log'),
        ('conversations', 'conversations_20_log_direct', 'head_log'),
        ('conversations', 'conversations_21_log_direct_change', 'head_log'),
        ('conversations', 'conversations_90_no_delete', 'append_only'),
        ('conversation_changes', 'conversation_changes_10_no_forgery', 'append_only'),
        ('conversation_changes', 'conversation_changes_30_no_update', 'append_only'),
        ('conversation_changes', 'conversation_changes_90_append_only', 'append_only'),
        ('messages', 'messages_20_guard', 'rule'),
        ('messages', 'messages_30_no_update', 'append_only'),
        ('messages', 'messages_90_append_only', 'append_only'),
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only'),
        ('keyed_parts', 'keyed_parts_20_guard', 'rule'),
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only'),
        ('live_path', 'live_path_10_no_forgery', 'append_only'),
        ('generations', 'generations_20_transition', 'rule'),
        ('generations', 'generations_90_no_delete', 'append_only'),
        ('tools', 'tools_10_no_forgery', 'append_only'),
        ('tools', 'tools_90_append_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_90_fixed', 'append_only'),
        ('tool_effects', 'tool_effects_10_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_20_transition', 'rule'),
        ('tool_effects', 'tool_effects_30_log_direct', 'rule'),
        ('tool_effects', 'tool_effects_90_no_delete', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_10_no_forgery', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_90_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_10_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_30_no_update', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_90_append_only', 'append_only'),
        ('tool_receipts', 'tool_receipts_10_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_20_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_90_no_delete', 'append_only'),
        ('erasures', 'erasures_10_no_forgery', 'append_only'),
        ('erasures', 'erasures_90_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_10_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_90_append_only', 'append_only'),
        ('import_origins', 'import_origins_10_no_forgery', 'append_only'),
        ('import_origins', 'import_origins_30_no_update', 'append_only'),
        ('import_origins', 'import_origins_90_append_only', 'append_only'),
        ('imports', 'imports_10_no_forgery', 'append_only'),
        ('imports', 'imports_30_no_update', 'append_only'),
        ('imports', 'imports_90_append_only', 'append_only'),
        ('message_parts', 'message_parts_10_refuse', 'append_only')) AS t (table_name, trigger_name, guards);
END;

-- conversations_11_new_guard: a conversation inserted outside pgconvo's code
-- is what create_conversation would write; pgconvo's own inserts skip it in
-- its WHEN.
CREATE OR REPLACE TRIGGER conversations_11_new_guard
    BEFORE INSERT ON convo.conversations
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.conversations_new_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_11_new_guard;

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
