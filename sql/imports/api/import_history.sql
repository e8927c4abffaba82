-- import_history: one conversation of another product's export, as
-- import_chatgpt, import_openwebui or import_librechat import it (p_format
-- 'chatgpt', 'openwebui' or 'librechat'; CV011 for another), and what the
-- import did, so that a caller need not re-derive it: the conversation's
-- id, whether this call created it (false: a repeat, which writes nothing),
-- the source's own id it was imported under (the source key: the export's
-- id, else 'sha:' and the md5 of the JSON), the messages it holds from the
-- import, the message-less source nodes kept verbatim
-- (metadata.import.dropped_nodes), and its title.
CREATE OR REPLACE FUNCTION convo.import_history(p_format text, p_owner_id text, p_source jsonb)
RETURNS TABLE (conversation_id uuid, source_key text, created boolean, messages int, nodes_kept int, title text)
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
    v_start timestamptz := clock_timestamp();
    v_id    uuid;
BEGIN
    v_id := CASE p_format
        WHEN 'chatgpt' THEN convo.import_chatgpt(p_owner_id, p_source)
        WHEN 'openwebui' THEN convo.import_openwebui(p_owner_id, p_source)
        WHEN 'librechat' THEN convo.import_librechat(p_owner_id, p_source) END;
    IF v_id IS NULL THEN
        RAISE EXCEPTION 'unknown import format %', coalesce(quote_literal(p_format), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Formats are chatgpt, openwebui and librechat.';
    END IF;
    -- Created by this call: its import record is no older than the call
    -- (a repeat returns an earlier import's conversation and writes none).
    RETURN QUERY
    SELECT c.id, i.source_key, i.imported_at >= v_start,
           (SELECT count(*)::int FROM convo.messages m WHERE m.conversation_id = c.id AND m.import_id = i.id),
           (SELECT count(*)::int
              FROM jsonb_object_keys(CASE WHEN jsonb_typeof(c.metadata -> 'import' -> 'dropped_nodes') = 'object'
                                          THEN c.metadata -> 'import' -> 'dropped_nodes' ELSE '{}' END)),
           c.title
      FROM convo.conversations c
      JOIN convo.imports i ON i.conversation_id = c.id AND i.format = p_format AND i.import_id IS NULL
     WHERE c.id = v_id
     ORDER BY i.imported_at DESC
     LIMIT 1;
END;
$$;

COMMENT ON FUNCTION convo.import_history(text, text, jsonb) IS
    'Import one conversation of a ChatGPT, Open WebUI or LibreChat export (p_format) and say what was done: id, source key, created or a repeat, messages, nodes kept, title.';
