-- 0043_one_trigger_list down: reverses 0043_one_trigger_list.up.sql.

-- Create as the migrating role, never as the owner role convo_owner, which
-- cannot log in (Citus runs DDL on its workers as the current role). A role
-- that is not a superuser becomes a member of convo_owner for this
-- transaction only (it needs CREATEROLE for that), to create in its schemas
-- and hand it what it creates.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
    END IF;
END;
$$;

-- package_triggers returned fewer columns: it is dropped, then created again.
DROP FUNCTION convo_private.package_triggers();

-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), by what it guards: append_only (refuse_change,
-- refuse_forgery), head_log (the conversation's guards and the logging of
-- direct head, title and archive updates), rule (the tree's and the
-- ledger's guards, the state machines) and row_security (a role row-level
-- security binds refused before the guards that run as the owner role read
-- a row for it). Each table's triggers are numbered
-- in the order they fire (PostgreSQL fires the triggers of one timing, event
-- and level by name): 05 whom row-level security binds, 10 and 11 who may write and what a new or changed row
-- may hold, 20 what a row must be (or, after the write, its log), 30 an
-- UPDATE refused or logged, 90 append-only. self_check requires each present and
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
        ('conversations', 'conversations_05_row_security', 'row_security'),
        ('conversations', 'conversations_10_guard', 'head_log'),
        ('conversations', 'conversations_11_new_guard', 'head_log'),
        ('conversations', 'conversations_12_head_guard', 'head_log'),
        ('conversations', 'conversations_20_log_direct', 'head_log'),
        ('conversations', 'conversations_21_log_direct_change', 'head_log'),
        ('conversations', 'conversations_90_no_delete', 'append_only'),
        ('conversation_changes', 'conversation_changes_10_no_forgery', 'append_only'),
        ('conversation_changes', 'conversation_changes_30_no_update', 'append_only'),
        ('conversation_changes', 'conversation_changes_90_append_only', 'append_only'),
        ('messages', 'messages_05_row_security', 'row_security'),
        ('messages', 'messages_20_guard', 'rule'),
        ('messages', 'messages_30_no_update', 'append_only'),
        ('messages', 'messages_90_append_only', 'append_only'),
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only'),
        ('keyed_parts', 'keyed_parts_20_guard', 'rule'),
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only'),
        ('live_path', 'live_path_10_no_forgery', 'append_only'),
        ('generations', 'generations_05_row_security', 'row_security'),
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
        ('owner_erasures', 'owner_erasures_10_no_forgery', 'append_only'),
        ('owner_erasures', 'owner_erasures_90_append_only', 'append_only'),
        ('import_origins', 'import_origins_10_no_forgery', 'append_only'),
        ('import_origins', 'import_origins_30_no_update', 'append_only'),
        ('import_origins', 'import_origins_90_append_only', 'append_only'),
        ('imports', 'imports_10_no_forgery', 'append_only'),
        ('imports', 'imports_30_no_update', 'append_only'),
        ('imports', 'imports_90_append_only', 'append_only'),
        ('message_parts', 'message_parts_10_refuse', 'append_only')) AS t (table_name, trigger_name, guards);
END;

DROP FUNCTION convo_private.create_triggers;

-- Reverse the table changes here, below the objects.

-- Give convo_owner what this migration created, then grant as documented.
SELECT convo_private.hand_over_objects();
SELECT convo_private.apply_grants();

-- Give back a membership taken above.
-- (A membership the role granted itself; one another role granted stays.)
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                WHERE m.roleid = 'convo_owner'::regrole AND m.member = current_user::regrole
                  AND m.grantor = m.member) THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_user);
    END IF;
END;
$$;
