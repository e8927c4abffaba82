-- import_openwebui: one Open WebUI chat (a row of its chat table or of the
-- UI's JSON export, which holds an object "chat", or the bare chat column)
-- as a new conversation of p_owner_id, by the rules of docs/importing.md
-- ("The rules"): history.messages by parentId (several roots when the first message
-- was edited; childrenIds that disagree with parentId are only counted),
-- history.currentId as the head, each message kept verbatim in
-- import_origins. Repeats, merges, CV011 and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_openwebui(p_owner_id text, p_chat jsonb)
RETURNS uuid
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
    v_row      jsonb;
    v_chat     jsonb;
    v_messages jsonb;
    v_current  jsonb;
    v_source   text;
    v_id       uuid;
    v_digest   text;
    v_existing uuid;
    v_where    text;
    v_bad      record;
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'import conversations');
    IF p_chat IS NULL OR jsonb_typeof(p_chat) <> 'object' THEN
        RAISE EXCEPTION 'p_chat must be one Open WebUI chat, a JSON object, not %', coalesce(jsonb_typeof(p_chat), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each element of an Open WebUI export on its own.';
    END IF;
    IF jsonb_typeof(p_chat -> 'chat') = 'object' THEN
        v_row := p_chat;
        v_chat := p_chat -> 'chat';
    ELSE
        v_chat := p_chat;
    END IF;
    v_messages := v_chat -> 'history' -> 'messages';
    v_current := v_chat -> 'history' -> 'currentId';
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('openwebui', 'Open WebUI chat', p_owner_id,
                                    coalesce(convo_private.nonempty_text(v_row -> 'id'),
                                             convo_private.nonempty_text(v_chat -> 'id')), p_chat) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'openwebui', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'an Open WebUI chat needs a "history.messages" object, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    SELECT e.key, e.why INTO v_bad
      FROM (SELECT n.key, CASE
                   WHEN jsonb_typeof(n.msg) <> 'object' THEN 'is not an object'
                   WHEN jsonb_typeof(n.msg -> 'id') NOT IN ('null') AND n.msg -> 'id' <> to_jsonb(n.key)
                       THEN 'has an id other than its key'
                   WHEN jsonb_typeof(n.msg -> 'role') IS DISTINCT FROM 'string'
                        OR n.msg ->> 'role' NOT IN ('user', 'assistant', 'system')
                       THEN 'has a missing or unknown role'
                   WHEN jsonb_typeof(n.msg -> 'parentId') NOT IN ('null')
                        AND (jsonb_typeof(n.msg -> 'parentId') <> 'string' OR NOT v_messages ? (n.msg ->> 'parentId'))
                       THEN 'names a parentId that is no message (missing parent)'
                   WHEN jsonb_typeof(n.msg -> 'childrenIds') NOT IN ('array', 'null')
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.msg -> 'childrenIds') = 'array'
                                                                           THEN n.msg -> 'childrenIds' END) c (child)
                                    WHERE jsonb_typeof(c.child) <> 'string')
                       THEN 'has childrenIds that are not an array of strings'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') NOT IN ('number', 'null')
                       THEN 'has a timestamp that is neither a number nor null'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') = 'number'
                        AND convo_private.epoch_time(n.msg -> 'timestamp', 1e11) IS NULL
                       THEN 'has a timestamp outside years 1 to 9999'
                   END AS why
              FROM jsonb_each(v_messages) AS n (key, msg)) e
     WHERE e.why IS NOT NULL
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'Open WebUI message % %', v_bad.key, v_bad.why
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad.key);
    END IF;
    IF jsonb_typeof(v_current) IS DISTINCT FROM 'null' AND v_current IS NOT NULL
       AND (jsonb_typeof(v_current) <> 'string' OR NOT v_messages ? (v_current #>> '{}')) THEN
        RAISE EXCEPTION 'history.currentId names no message'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, currentId %s', v_where, left(v_current::text, convo_private.max_id_length()));
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'openwebui', v_source, v_digest, v_messages,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        coalesce(convo_private.epoch_time(v_row -> 'created_at', 1e11), convo_private.epoch_time(v_chat -> 'timestamp', 1e11)),
        jsonb_build_object('format', 'openwebui', 'source_id', v_source,
                           'title', coalesce(nullif(v_row -> 'title', 'null'), v_chat -> 'title'),
                           'chat', v_chat - 'history' - 'messages', 'row', v_row - 'chat',
                           'requested_head', coalesce(v_current, 'null')),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_openwebui(text, jsonb) IS
    'Import one Open WebUI chat (history.messages by parentId, currentId as the head); a repeat returns the same id.';
