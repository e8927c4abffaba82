-- create_triggers: creates (or re-creates) every trigger of
-- package_triggers, each ENABLE ALWAYS (a view's as views allow), so that
-- neither session_replication_role nor a plain ENABLE skips it. It holds
-- the one clause that lets pgconvo's own code through, which a trigger's
-- WHEN names as %s: current_user the owner role (a SECURITY DEFINER
-- function of pgconvo's) with neither a SET ROLE nor a SET SESSION
-- AUTHORIZATION to it behind it. A migration that changes the list runs
-- it; invoker rights, as the migrating role.
CREATE OR REPLACE FUNCTION convo_private.create_triggers()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_outside constant text :=
        'current_user <> ''convo_owner'' OR current_setting(''role'') = ''convo_owner'' OR session_user = ''convo_owner''';
    v record;
BEGIN
    FOR v IN SELECT t.*, c.relkind FROM convo_private.package_triggers() t
               JOIN pg_class c ON c.oid = format('convo.%I', t.table_name)::regclass LOOP
        EXECUTE format('CREATE OR REPLACE TRIGGER %I %s %s ON convo.%I FOR EACH %s %sEXECUTE FUNCTION convo_private.%s',
                       v.trigger_name, v.timing, v.events, v.table_name, v.level,
                       CASE WHEN v.when_clause IS NOT NULL THEN format('WHEN (%s) ', format(v.when_clause, v_outside)) ELSE '' END,
                       v.function_call);
        IF v.relkind <> 'v' THEN
            EXECUTE format('ALTER TABLE convo.%I ENABLE ALWAYS TRIGGER %I', v.table_name, v.trigger_name);
        END IF;
    END LOOP;
END;
$$;
