-- 0008_render down: reverses 0008_render.up.sql.

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

-- documented_grants: every privilege pgconvo grants, as data (the README's
-- "Security" section in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's (the allowlist, the
-- sweeps, erasure) for convo_admin, a member of both; SELECT on the views
-- for convo_app, on every table and view for convo_reader. Nothing for
-- PUBLIC, nothing at all on convo_private. A function added later is nobody's until it is listed here.
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
                                       'max_ref_length']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts', 'erase_conversation', 'erase_owner'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace;
END;

DROP FUNCTION convo_private.request_part;

DROP FUNCTION convo_private.path_parts;

DROP FUNCTION convo.request_messages;

DROP FUNCTION convo.request_digest;

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
