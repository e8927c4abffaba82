-- distribute_tables: pgconvo's tables spread over a Citus cluster, each
-- beside what it is read with: a conversation's rows (its messages, head
-- log, live path, generations, ledger, imports, changes, erasures, search
-- index) on the
-- node of its id; an owner's receipts, their erasures and the owner's hold
-- on the node of the owner; the allowlist, the effect state machine and the digest key, which
-- every node reads, on every node. Citus distributes a table only without
-- foreign keys to tables not yet distributed, so they are dropped first and
-- put back after; the guards are off while Citus copies rows into the
-- shards (they would refuse the copy as a forgery) and on again after. A
-- foreign key Citus cannot hold (one between rows on different nodes) is
-- not put back and is returned, so the caller can say so. Run once, by the
-- migrating role, in the transaction that distributes.
CREATE OR REPLACE FUNCTION convo_node.distribute_tables()
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_fks    jsonb;
    v_fk     jsonb;
    v_table  regclass;
    v_tables regclass[] := ARRAY(SELECT c.oid::regclass FROM pg_class c
                                  WHERE c.relkind = 'r'
                                    AND c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
                                  ORDER BY c.oid);
BEGIN
    SELECT coalesce(jsonb_agg(jsonb_build_object('table', k.conrelid::regclass::text, 'referenced', k.confrelid::regclass::text,
                                                 'name', k.conname, 'definition', pg_get_constraintdef(k.oid))
                              ORDER BY k.conrelid, k.conname), '[]')
      INTO v_fks
      FROM pg_constraint k
     WHERE k.contype = 'f' AND k.conrelid = ANY (v_tables);
    FOR v_fk IN SELECT * FROM jsonb_array_elements(v_fks) LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', v_fk ->> 'table', v_fk ->> 'name');
    END LOOP;
    FOREACH v_table IN ARRAY v_tables LOOP
        EXECUTE format('ALTER TABLE %s DISABLE TRIGGER USER', v_table);
    END LOOP;

    PERFORM create_reference_table(t)
       FROM unnest(ARRAY['convo.tools', 'convo.effect_transitions', 'convo_private.digest_key',
                         'convo_private.settings']::regclass[]) AS t;
    PERFORM create_distributed_table('convo.conversations', 'id');
    PERFORM create_distributed_table(t, 'conversation_id', colocate_with => 'convo.conversations')
       FROM unnest(ARRAY['convo.messages', 'convo.conversation_head_log', 'convo.live_path', 'convo.generations',
                         'convo.keyed_parts', 'convo.tool_effects', 'convo.tool_effect_calls',
                         'convo.tool_effect_events', 'convo.imports', 'convo.import_origins',
                         'convo.conversation_changes', 'convo.erasures', 'convo.erasure_places',
                         'convo_private.message_search']::regclass[]) WITH ORDINALITY AS u (t, n)
      ORDER BY n;
    PERFORM create_distributed_table('convo.tool_receipts', 'owner_id');
    PERFORM create_distributed_table(t, 'owner_id', colocate_with => 'convo.tool_receipts')
       FROM unnest(ARRAY['convo.owner_erasures', 'convo_private.owner_holds']::regclass[])
            WITH ORDINALITY AS u (t, n)
      ORDER BY n;

    FOR v_fk IN SELECT * FROM jsonb_array_elements(v_fks) LOOP
        IF (SELECT p.colocationid FROM pg_dist_partition p WHERE p.logicalrelid = (v_fk ->> 'table')::regclass)
           = (SELECT p.colocationid FROM pg_dist_partition p WHERE p.logicalrelid = (v_fk ->> 'referenced')::regclass)
           OR (SELECT p.partmethod FROM pg_dist_partition p WHERE p.logicalrelid = (v_fk ->> 'referenced')::regclass) = 'n' THEN
            EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', v_fk ->> 'table', v_fk ->> 'name', v_fk ->> 'definition');
        ELSE
            RETURN NEXT format('%s: %s', v_fk ->> 'table', v_fk ->> 'name');
        END IF;
    END LOOP;
    FOREACH v_table IN ARRAY v_tables LOOP
        EXECUTE format('ALTER TABLE %s ENABLE TRIGGER USER', v_table);
    END LOOP;
END;
$$;
