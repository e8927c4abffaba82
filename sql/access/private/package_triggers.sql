-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), the one list they are created from
-- (create_triggers): table, name, what it guards, when it fires, the
-- function it runs and its WHEN clause, in which %s stands for the one
-- clause that lets pgconvo's own code through (create_triggers holds it).
-- What each guards: append_only (refuse_change, refuse_forgery), head_log
-- (the conversation's guards and the logging of direct head, title and
-- archive updates), rule (the tree's and the ledger's guards, the state
-- machines) and row_security (a role row-level security binds refused
-- before the guards that run as the owner role read a row for it). Each
-- table's triggers are numbered in the order they fire (PostgreSQL fires
-- the triggers of one timing, event and level by name): 05 whom row-level
-- security binds, 10 and 11 who may write and what a new or changed row may
-- hold, 20 what a row must be (or, after the write, its log), 30 an UPDATE
-- refused or logged, 90 append-only. self_check requires each present and
-- ENABLE ALWAYS (a view's are enabled as views allow), and no other trigger
-- on the package's tables; docs/guide.md's table of them is written from
-- this list (cmd/apidocs).
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text, timing text, events text, level text,
               function_call text, when_clause text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards, t.timing, t.events, t.level, t.function_call, t.when_clause
      FROM (VALUES
        -- conversations_05_row_security: a role row-level security binds is refused (42501,
        -- refuse_row_security_bound) before the guards, which run as the owner role, read any row for it;
        -- pgconvo's own writes skip it in its WHEN.
        ('conversations', 'conversations_05_row_security', 'row_security', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_row_security_bound()', '%s'),
        -- conversations_10_guard: id, owner and creation time never change, a head once set is never unset,
        -- and outside pgconvo's code metadata never changes (erasure is pgconvo's). pgconvo's own head moves
        -- skip it in its WHEN.
        ('conversations', 'conversations_10_guard', 'head_log', 'BEFORE', 'UPDATE', 'ROW', 'conversations_guard()', 'OLD.id IS DISTINCT FROM NEW.id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.created_at IS DISTINCT FROM NEW.created_at OR (OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL) OR %s'),
        -- conversations_11_new_guard: a conversation inserted outside pgconvo's code is what
        -- create_conversation would write; pgconvo's own inserts skip it in its WHEN.
        ('conversations', 'conversations_11_new_guard', 'head_log', 'BEFORE', 'INSERT', 'ROW', 'conversations_new_guard()', '%s'),
        -- conversations_12_head_guard: a head moved outside pgconvo's code names a message of its own
        -- conversation, in replica mode too (which skips the foreign key), and every update outside pgconvo's
        -- code is the writer's owner's; pgconvo's own updates skip it in its WHEN.
        ('conversations', 'conversations_12_head_guard', 'head_log', 'BEFORE', 'UPDATE', 'ROW', 'conversations_head_guard()', '%s'),
        -- conversations_20_log_direct: a head moved outside pgconvo's code (a direct UPDATE) writes exactly
        -- one head-log row, direct_update by the caller, in the same transaction; pgconvo's own moves log
        -- themselves (log_head_move).
        ('conversations', 'conversations_20_log_direct', 'head_log', 'AFTER', 'UPDATE', 'ROW', 'log_direct_head_move()', 'OLD.head_message_id IS DISTINCT FROM NEW.head_message_id AND (%s)'),
        -- conversations_21_log_direct_change: a title, archive state or deletion changed outside pgconvo's code (a
        -- direct UPDATE) is logged in the change log, by the caller, in the same transaction; pgconvo's own
        -- changes log themselves (log_change).
        ('conversations', 'conversations_21_log_direct_change', 'head_log', 'AFTER', 'UPDATE', 'ROW', 'log_direct_change()', '(OLD.title IS DISTINCT FROM NEW.title OR OLD.archived IS DISTINCT FROM NEW.archived OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at) AND (%s)'),
        -- conversations_90_no_delete: conversations are never deleted, by any role.
        ('conversations', 'conversations_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- conversation_changes_10_no_forgery: only pgconvo's code (or a superuser) writes the change log, so a
        -- change reaches it only as it happened.
        ('conversation_changes', 'conversation_changes_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- conversation_changes_30_no_update: outside pgconvo's code a change row is never updated; pgconvo's
        -- only update of one is erasure's redaction of a title.
        ('conversation_changes', 'conversation_changes_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (titles change only by erasure)'')', '%s'),
        -- conversation_changes_90_append_only: change rows are never deleted, by any role.
        ('conversation_changes', 'conversation_changes_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- messages_05_row_security: a role row-level security binds is refused (42501,
        -- refuse_row_security_bound) before the guards, which run as the owner role, read any row for it;
        -- pgconvo's own writes skip it in its WHEN.
        ('messages', 'messages_05_row_security', 'row_security', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_row_security_bound()', '%s'),
        -- messages_20_guard: a message inserted outside pgconvo's code must be placed as the tree places it,
        -- with well-formed parts (messages_guard); pgconvo's own writes (write_messages) skip it in its WHEN.
        ('messages', 'messages_20_guard', 'rule', 'BEFORE', 'INSERT', 'ROW', 'messages_guard()', '%s'),
        -- messages_30_no_update: outside pgconvo's code a message is never updated; pgconvo's only update of
        -- one is erasure's redaction (erase_content).
        ('messages', 'messages_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (content changes only by erasure)'')', '%s'),
        -- messages_90_append_only: messages are never deleted, by any role.
        ('messages', 'messages_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- keyed_parts_10_no_forgery: only pgconvo's code (or a superuser) writes the keyed parts, with their
        -- messages.
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- keyed_parts_20_guard: a keyed part written outside pgconvo's code must be its message's part at that
        -- ordinal (keyed_parts_guard).
        ('keyed_parts', 'keyed_parts_20_guard', 'rule', 'BEFORE', 'INSERT', 'ROW', 'keyed_parts_guard()', '%s'),
        -- keyed_parts_90_append_only: a keyed part holds ids only, which erasure keeps: it is never updated or
        -- deleted, by any role.
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- conversation_head_log_10_no_forgery: only pgconvo's code (or a superuser) writes head-log rows, so a
        -- reason or mover reaches the log only through the API (a direct head UPDATE is logged as
        -- direct_update).
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- conversation_head_log_90_append_only: the head log is append-only, for every role, the owner role
        -- included.
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- live_path_10_no_forgery: the derived index of the live paths is written only by pgconvo's code
        -- (log_head_move, move_live_path), or a superuser; never emptied by TRUNCATE, which row-level security
        -- does not bind.
        ('live_path', 'live_path_10_no_forgery', 'append_only', 'BEFORE', 'INSERT OR UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- generations_05_row_security: a role row-level security binds is refused (42501,
        -- refuse_row_security_bound) before the guards, which run as the owner role, read any row for it;
        -- pgconvo's own writes skip it in its WHEN.
        ('generations', 'generations_05_row_security', 'row_security', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_row_security_bound()', '%s'),
        -- generations_20_transition: outside pgconvo's code a generation starts streaming and ends once, and
        -- its identity never changes.
        ('generations', 'generations_20_transition', 'rule', 'BEFORE', 'INSERT OR UPDATE', 'ROW', 'generations_transition()', '%s'),
        -- generations_90_no_delete: generations are never deleted, by any role.
        ('generations', 'generations_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tools_10_no_forgery: only register_tool (or a superuser) adds to the allowlist.
        ('tools', 'tools_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tools_90_append_only: a registered tool version is frozen, for every role.
        ('tools', 'tools_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- effect_transitions_90_fixed: the effect state machine is data, and fixed.
        ('effect_transitions', 'effect_transitions_90_fixed', 'append_only', 'BEFORE', 'INSERT OR UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change(''the fixed effect state machine'')', NULL),
        -- tool_effects_10_no_forgery: only pgconvo's code (or a superuser) writes the ledger.
        ('tool_effects', 'tool_effects_10_no_forgery', 'append_only', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_effects_20_transition: outside pgconvo's code an effect changes only by a transition of the
        -- state machine (effect_transitions), CV006 otherwise.
        ('tool_effects', 'tool_effects_20_transition', 'rule', 'BEFORE', 'INSERT OR UPDATE', 'ROW', 'tool_effects_transition()', '%s'),
        -- tool_effects_30_log_direct: a transition made outside pgconvo's code gets its event, by the caller;
        -- pgconvo's own transitions log themselves.
        ('tool_effects', 'tool_effects_30_log_direct', 'rule', 'AFTER', 'INSERT OR UPDATE', 'ROW', 'tool_effects_log_direct()', '%s'),
        -- tool_effects_90_no_delete: effects are never deleted, by any role.
        ('tool_effects', 'tool_effects_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tool_effect_calls_10_no_forgery: only pgconvo's code (or a superuser) links a call to its decision.
        ('tool_effect_calls', 'tool_effect_calls_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_effect_calls_90_append_only: a call's decision never changes.
        ('tool_effect_calls', 'tool_effect_calls_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tool_effect_events_10_no_forgery: only pgconvo's code (or a superuser) writes the event log.
        ('tool_effect_events', 'tool_effect_events_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_effect_events_30_no_update: outside pgconvo's code an event is never updated; pgconvo's only
        -- update of one is erasure's redaction.
        ('tool_effect_events', 'tool_effect_events_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (evidence changes only by erasure)'')', '%s'),
        -- tool_effect_events_90_append_only: events are never deleted, by any role.
        ('tool_effect_events', 'tool_effect_events_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- tool_receipts_10_no_forgery: only pgconvo's code (or a superuser) writes receipts.
        ('tool_receipts', 'tool_receipts_10_no_forgery', 'append_only', 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- tool_receipts_20_transition: outside pgconvo's code a receipt is filed pending and ends once, CV006
        -- otherwise.
        ('tool_receipts', 'tool_receipts_20_transition', 'rule', 'BEFORE', 'INSERT OR UPDATE', 'ROW', 'tool_receipts_transition()', '%s'),
        -- tool_receipts_90_no_delete: receipts are never deleted, by any role.
        ('tool_receipts', 'tool_receipts_90_no_delete', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- erasures_10_no_forgery: only erase_conversation and erase_owner (or a superuser) record an erasure.
        ('erasures', 'erasures_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- erasures_90_append_only: the record of erasures is append-only.
        ('erasures', 'erasures_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- erasure_places_10_no_forgery: only erasure (or a superuser) records where it redacted.
        ('erasure_places', 'erasure_places_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- erasure_places_90_append_only: the record of erasures is append-only.
        ('erasure_places', 'erasure_places_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- owner_erasures_10_no_forgery: only erase_owner (or a superuser) records an erasure of an owner's
        -- receipts.
        ('owner_erasures', 'owner_erasures_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- owner_erasures_90_append_only: the record of erasures is append-only.
        ('owner_erasures', 'owner_erasures_90_append_only', 'append_only', 'BEFORE', 'UPDATE OR DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- import_origins_10_no_forgery: only the import functions (or a superuser) write origin records, the
        -- source nodes kept verbatim beside the messages.
        ('import_origins', 'import_origins_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- import_origins_30_no_update: outside pgconvo's code an origin record is never updated; pgconvo's
        -- only update of one is erasure's redaction.
        ('import_origins', 'import_origins_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (a source node changes only by erasure)'')', '%s'),
        -- import_origins_90_append_only: origin records are never deleted.
        ('import_origins', 'import_origins_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- imports_10_no_forgery: only the import functions (or a superuser) record an import (who, when, the
        -- document's digest), so a record names the role that really imported.
        ('imports', 'imports_10_no_forgery', 'append_only', 'BEFORE', 'INSERT', 'STATEMENT', 'refuse_forgery()', '%s'),
        -- imports_30_no_update: outside pgconvo's code an import's record is never updated; pgconvo's only
        -- update of one is erasure's redaction.
        ('imports', 'imports_30_no_update', 'append_only', 'BEFORE', 'UPDATE', 'STATEMENT', 'refuse_change(''append-only (its source key and digest change only by erasure)'')', '%s'),
        -- imports_90_append_only: the record of imports is never deleted.
        ('imports', 'imports_90_append_only', 'append_only', 'BEFORE', 'DELETE OR TRUNCATE', 'STATEMENT', 'refuse_change()', NULL),
        -- message_parts_10_refuse: convo.message_parts is a view of the parts of the messages (their array,
        -- one row a part): it is never written.
        ('message_parts', 'message_parts_10_refuse', 'append_only', 'INSTEAD OF', 'INSERT OR UPDATE OR DELETE', 'ROW', 'refuse_change(''a view of the messages'''' parts (append-only)'')', NULL)
        ) AS t (table_name, trigger_name, guards, timing, events, level, function_call, when_clause);
END;
