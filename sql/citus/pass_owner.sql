-- pass_owner: the caller's owner (convo.owner_id), set again with SET
-- LOCAL so that Citus sends it to the node a delegated call runs on, which
-- it does for SET LOCAL (with citus.propagate_set_commands = 'local',
-- set here too for a session older than distribute's database setting)
-- and never for set_config. The routers call it before each delegated
-- call; it sets nothing the caller had not set.
CREATE OR REPLACE FUNCTION convo_node.pass_owner()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.owner_id', true) <> '' THEN
        SET LOCAL citus.propagate_set_commands = 'local';
        EXECUTE format('SET LOCAL convo.owner_id = %L', current_setting('convo.owner_id'));
    END IF;
END;
$$;
