-- hand_over_objects: gives convo_owner every object of schemas convo and
-- convo_private that another role owns, as if convo_owner had created it:
-- the owner, and no EXECUTE for PUBLIC on a routine (the default privileges
-- 0003 set for convo_owner). A migration as cmd/newmigration writes it
-- creates its objects as the migrating role, not as convo_owner (Citus
-- sends DDL to its workers over new connections as the current role, and
-- convo_owner cannot log in), then runs this, then apply_grants. What
-- follows another object's owner goes with it: a table's indexes, row type
-- and column sequences, a type's array (a range's constructors stay the
-- bootstrap superuser's, whoever creates the range). Invoker rights: the
-- migrating role runs it, a superuser or a member of convo_owner.
CREATE OR REPLACE FUNCTION convo_private.hand_over_objects()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    FOR v IN
        WITH ours (classid, objid, owner) AS (
            SELECT 'pg_namespace'::regclass, n.oid, n.nspowner FROM pg_namespace n
             WHERE n.nspname IN ('convo', 'convo_private')
            UNION ALL
            SELECT 'pg_class'::regclass, c.oid, c.relowner FROM pg_class c
             WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
               AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
               AND NOT EXISTS (SELECT FROM pg_depend d      -- a column's sequence goes with its table
                                WHERE c.relkind = 'S' AND d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))
            UNION ALL
            SELECT 'pg_type'::regclass, t.oid, t.typowner FROM pg_type t
             WHERE t.typnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
               AND NOT EXISTS (SELECT FROM pg_type e WHERE e.typarray = t.oid)
               AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c')
            UNION ALL
            SELECT 'pg_proc'::regclass, p.oid, p.proowner FROM pg_proc p
             WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
               AND NOT EXISTS (SELECT FROM pg_depend d      -- a range's constructors
                                WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'i')
            UNION ALL
            SELECT 'pg_operator'::regclass, o.oid, o.oprowner FROM pg_operator o
             WHERE o.oprnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_opclass'::regclass, o.oid, o.opcowner FROM pg_opclass o
             WHERE o.opcnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_opfamily'::regclass, o.oid, o.opfowner FROM pg_opfamily o
             WHERE o.opfnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_collation'::regclass, o.oid, o.collowner FROM pg_collation o
             WHERE o.collnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_conversion'::regclass, o.oid, o.conowner FROM pg_conversion o
             WHERE o.connamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_ts_config'::regclass, o.oid, o.cfgowner FROM pg_ts_config o
             WHERE o.cfgnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_ts_dict'::regclass, o.oid, o.dictowner FROM pg_ts_dict o
             WHERE o.dictnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_statistic_ext'::regclass, o.oid, o.stxowner FROM pg_statistic_ext o
             WHERE o.stxnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace))
        SELECT ours.classid, i.type, i.identity
          FROM ours CROSS JOIN LATERAL pg_identify_object(ours.classid, ours.objid, 0) i
         WHERE ours.owner <> 'convo_owner'::regrole
         ORDER BY ours.classid = 'pg_namespace'::regclass DESC, i.type, i.identity
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO convo_owner',
                       CASE v.type WHEN 'partitioned table' THEN 'TABLE'
                                   WHEN 'statistics object' THEN 'STATISTICS'
                                   ELSE upper(v.type) END,
                       v.identity);
        IF v.classid = 'pg_proc'::regclass THEN
            EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', v.identity);
        END IF;
    END LOOP;
END;
$$;
