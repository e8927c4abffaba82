-- set_search_config: the database's text search configuration, convo_admin's:
-- one of pg_ts_config (english, german, simple, ...; a DBA may make one of
-- their own). Every message's entry in the search index is written again
-- under it, in this transaction (linear in the messages; every write of a
-- message waits for it to commit, so run it when installing or in a quiet
-- hour); a search then matches words as that language stems them.
-- An unknown configuration or NULL is CV011, writing nothing; the same one
-- again writes nothing.
CREATE OR REPLACE FUNCTION convo.set_search_config(p_config text)
RETURNS void
LANGUAGE plpgsql
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
DECLARE
    v_config regconfig;
BEGIN
    SELECT c.oid::regconfig INTO v_config FROM pg_ts_config c WHERE c.oid::regconfig::text = p_config;
    IF v_config IS NULL THEN
        RAISE EXCEPTION 'no text search configuration %', coalesce(quote_literal(p_config), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('configuration %s', coalesce(quote_literal(p_config), 'NULL')),
                  HINT = 'SELECT cfgname FROM pg_ts_config lists them (english, simple, ...).';
    END IF;
    IF v_config = convo_private.search_config_in_use() THEN
        RETURN;
    END IF;
    -- No message is indexed meanwhile: a write waits for this to commit,
    -- then reads the new configuration (index_messages).
    LOCK TABLE convo_private.message_search IN EXCLUSIVE MODE;
    INSERT INTO convo_private.settings (search_config, set_by) VALUES (v_config::text, convo_private.caller())
    ON CONFLICT (singleton) DO UPDATE
       SET search_config = excluded.search_config, set_by = excluded.set_by, set_at = excluded.set_at;
    UPDATE convo_private.message_search s
       SET document = convo_private.search_document(m.parts, v_config, c.owner_id)
      FROM convo.messages m, convo.conversations c
     WHERE m.conversation_id = s.conversation_id AND m.id = s.message_id AND c.id = s.conversation_id;
END;
$$;

COMMENT ON FUNCTION convo.set_search_config(text) IS
    'Set the text search configuration (language) of search_conversations and write the index again under it; convo_admin''s.';
