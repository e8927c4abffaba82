-- documented_grants: every privilege pgconvo grants, as data (the README's
-- "Security" section in rows): USAGE on schema convo for the three roles;
-- EXECUTE on every API function for convo_app but the DBA's (register_tool,
-- expire_receipts, self_check), on the read-only functions and self_check
-- for convo_reader, on the DBA's for convo_admin (a member of both); SELECT
-- on the views for convo_app, on every table and view for convo_reader.
-- Nothing for PUBLIC, nothing at all on convo_private. apply_grants makes the
-- catalog say exactly this; self_check compares the two.
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
      JOIN (VALUES ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, 'convo_app', 'EXECUTE'
      FROM pg_proc p
     WHERE p.pronamespace = 'convo'::regnamespace
       AND p.proname <> ALL (ARRAY['register_tool', 'expire_receipts', 'self_check'])
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace;
END;
