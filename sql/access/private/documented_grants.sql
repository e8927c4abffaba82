-- documented_grants: every privilege pgconvo grants, as data (docs/security.md,
-- "The roles" and "Granting", in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's (the allowlist, the
-- sweeps, erasure, restoring an export) for convo_admin, a member of both; SELECT on the views
-- for convo_app, on every table and view for convo_reader, with EXECUTE on
-- the convo_private functions those views read their rows from (a view's
-- functions are called with the reader's rights; without USAGE on the
-- schema nobody can name them, and they return what the view does).
-- Nothing for PUBLIC, nothing else on convo_private. A function added later is nobody's until it is listed here.
-- apply_grants makes the catalog say exactly this; self_check compares.
CREATE OR REPLACE FUNCTION convo_private.documented_grants()
RETURNS TABLE (object_kind text, object_name text, grantee text, privilege text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'SCHEMA', 'convo', r.grantee, 'USAGE'
      FROM unnest(ARRAY['convo_app', 'convo_reader', 'convo_admin']) AS r (grantee)
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, g.grantee, 'EXECUTE'
      FROM pg_proc p
      JOIN (VALUES ('convo_app', ARRAY['create_conversation', 'append_message', 'edit_and_resend', 'regenerate',
                                       'move_head', 'path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                       'begin_generation', 'complete_generation', 'fail_generation',
                                       'cancel_generation', 'effect_for_call', 'settle_effect', 'compensate_effect',
                                       'confirm_effect', 'decline_effect', 'begin_receipt', 'fill_receipt',
                                       'apply_receipt', 'fail_receipt', 'args_errors', 'generation_stale_after',
                                       'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                       'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                       'max_ref_length', 'request_messages', 'request_digest',
                                       'import_chatgpt', 'import_openwebui', 'import_librechat', 'import_history',
                                       'export_conversation', 'conversations', 'set_title', 'archive_conversation',
                                       'unarchive_conversation', 'delete_conversation', 'deletion_retention',
                                       'search_conversations', 'search_config', 'live_updates']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length', 'request_messages', 'request_digest',
                                          'export_conversation', 'conversations', 'deletion_retention',
                                          'search_conversations', 'search_config', 'live_updates']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts', 'erase_conversation', 'erase_owner',
                                         'import_conversation', 'restore_deleted_conversation', 'erase_due',
                                         'set_deletion_retention', 'set_search_config', 'set_live_updates'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, r.grantee, 'EXECUTE'
      FROM pg_proc p
     CROSS JOIN unnest(ARRAY['convo_app', 'convo_reader']) AS r (grantee)
     WHERE p.pronamespace = 'convo_private'::regnamespace
       AND p.proname IN ('orphaned_applied_effects_rows', 'stale_pending_effects_rows', 'stale_generations_rows');
END;
