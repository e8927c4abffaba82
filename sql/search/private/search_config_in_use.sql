-- search_config_in_use: the text search configuration the index is
-- written and searched with: the database's setting (set_search_config),
-- 'simple' until a DBA sets one. PL/pgSQL, as search_text: its plan is kept
-- for the session.
CREATE OR REPLACE FUNCTION convo_private.search_config_in_use()
RETURNS regconfig
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT s.search_config FROM convo_private.settings s), 'simple')::regconfig;
END;
$$;
