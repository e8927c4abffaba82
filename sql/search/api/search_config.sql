-- search_config: the text search configuration (the language whose words
-- and stems search_conversations matches): the database's setting
-- (set_search_config), 'simple' (every word as written, any language)
-- until a DBA sets one.
CREATE OR REPLACE FUNCTION convo.search_config()
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    RETURN convo_private.search_config_in_use()::text;
END;
$$;

COMMENT ON FUNCTION convo.search_config() IS
    'The text search configuration search_conversations uses (''simple'' until set_search_config).';
