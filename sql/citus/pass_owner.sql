-- pass_owner: the caller's owner (convo.owner_id), set again with SET
-- LOCAL so that Citus sends it to the node a delegated call runs on, which
-- it does for SET LOCAL (with citus.propagate_set_commands = 'local',
-- set here too for a session older than distribute's database setting)
-- and never for set_config or a plain SET. The routers call it before each
-- delegated call. It always sets it, to '' when the caller has none, so
-- that an owner the caller cleared since an earlier call of the same
-- transaction is cleared on the node too.
CREATE OR REPLACE FUNCTION convo_node.pass_owner()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SET LOCAL citus.propagate_set_commands = 'local';
    EXECUTE format('SET LOCAL convo.owner_id = %L', coalesce(current_setting('convo.owner_id', true), ''));
END;
$$;
