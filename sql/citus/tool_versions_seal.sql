-- tool_versions_seal: the seal on the coordinator's versions of one tool
-- (register_tool_here), a keyed digest of the name and the rows: a worker
-- copies only rows that carry it (register_tool_on_node).
CREATE OR REPLACE FUNCTION convo_node.tool_versions_seal(p_name text, p_versions jsonb)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT convo_private.keyed_digest(jsonb_build_array('tools', p_name, p_versions)::text)
$$;
