-- granted_privileges: every privilege the catalog holds on pgconvo's
-- schemas, relations and functions for a role other than the object's owner
-- (PUBLIC included, and the implicit defaults: a function without an ACL is
-- executable by PUBLIC). Compared with documented_grants by self_check.
CREATE OR REPLACE FUNCTION convo_private.granted_privileges()
RETURNS TABLE (object_kind text, object_name text, grantee text, privilege text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'SCHEMA', n.nspname::text, coalesce(r.rolname::text, 'PUBLIC'), a.privilege_type
      FROM pg_namespace n
     CROSS JOIN LATERAL aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
      LEFT JOIN pg_roles r ON r.oid = a.grantee
     WHERE n.nspname IN ('convo', 'convo_private') AND a.grantee <> n.nspowner
    UNION ALL
    SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass::text,
           coalesce(r.rolname::text, 'PUBLIC'), a.privilege_type
      FROM pg_class c
     CROSS JOIN LATERAL aclexplode(coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                                c.relowner))) a
      LEFT JOIN pg_roles r ON r.oid = a.grantee
     WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
       AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND a.grantee <> c.relowner
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, coalesce(r.rolname::text, 'PUBLIC'), a.privilege_type
      FROM pg_proc p
     CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
      LEFT JOIN pg_roles r ON r.oid = a.grantee
     WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND a.grantee <> p.proowner;
END;
