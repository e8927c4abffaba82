-- import_librechat: one conversation of LibreChat's own JSON export (a
-- recursive one, replies nested in children, or a flat list) as a new
-- conversation of p_owner_id, by the rules of import_chatgpt wherever they
-- apply: the whole tree by parentMessageId (the zero UUID or null: a root),
-- messages keyed by messageId, original times (createdAt; without one the
-- parent's, a root the conversation's: its earliest createdAt), user when
-- isCreatedByUser else assistant, the latest leaf as the head (there is no
-- current-leaf field: head_fallback latest_leaf), each message kept in
-- import_origins (a recursive export's without its children, which are
-- messages of their own), the top-level fields in metadata.import. Repeats,
-- merges, CV011 (naming the message) and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_librechat(p_owner_id text, p_conversation jsonb)
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
    v_messages  jsonb := p_conversation -> 'messages';
    v_recursive boolean;
    v_source    text;
    v_id        uuid;
    v_digest    text;
    v_existing  uuid;
    v_where     text;
    v_bad       text[];
    v_nodes     jsonb;
    v_time      timestamptz;
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'import conversations');
    IF p_conversation IS NULL OR jsonb_typeof(p_conversation) <> 'object' THEN
        RAISE EXCEPTION 'p_conversation must be one LibreChat conversation, a JSON object, not %',
                coalesce(jsonb_typeof(p_conversation), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each exported conversation on its own.';
    END IF;
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('librechat', 'LibreChat conversation', p_owner_id,
                                    convo_private.nonempty_text(p_conversation -> 'conversationId'), p_conversation) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'librechat', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'a LibreChat conversation needs a "messages" array, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    v_recursive := p_conversation -> 'recursive' = 'true';
    -- One pass over the messages: the first refusal in document order, the
    -- nodes for import_tree (keyed by messageId: the source parent, the
    -- time, the origin and, when read, the nested children's ids), and the
    -- conversation's time. Parents and duplicates are hash joins.
    WITH f AS MATERIALIZED (
        SELECT x.*,
               CASE WHEN jsonb_typeof(x.message) = 'object' THEN convo_private.nonempty_text(x.message -> 'messageId') END AS id,
               CASE WHEN jsonb_typeof(x.message -> 'parentMessageId') = 'string'
                         AND x.message ->> 'parentMessageId' <> '00000000-0000-0000-0000-000000000000'
                    THEN x.message ->> 'parentMessageId' END AS parent,
               convo_private.iso_time(x.message -> 'createdAt') AS at
          FROM convo_private.librechat_flatten(v_messages, v_recursive) x
    ), ids AS MATERIALIZED (
        SELECT f.id, count(*) AS n FROM f WHERE f.id IS NOT NULL GROUP BY f.id
    ), c AS MATERIALIZED (
        SELECT f.*,
               coalesce(left(f.id, convo_private.max_id_length()),
                        CASE WHEN f.depth = 0 THEN format('messages[%s]', f.ord - 1)
                             ELSE format('children[%s] of message %s', f.ord - 1, coalesce(f.nest_parent, 'without a messageId')) END)
                   AS name,
               CASE WHEN jsonb_typeof(f.message) <> 'object' THEN 'is not an object'
                    WHEN f.id IS NULL THEN 'has no messageId (a non-empty string)'
                    WHEN f.id = '00000000-0000-0000-0000-000000000000'
                        THEN 'has the zero UUID, which means "no parent", as its messageId'
                    WHEN d.n > 1 THEN 'has the messageId of another message too (a duplicate)'
                    WHEN jsonb_typeof(f.message -> 'parentMessageId') NOT IN ('string', 'null')
                        THEN 'has a parentMessageId that is neither a string nor null'
                    WHEN f.parent IS NOT NULL AND p.id IS NULL
                        THEN 'names a parentMessageId that is no message (missing parent)'
                    WHEN jsonb_typeof(f.message -> 'isCreatedByUser') NOT IN ('boolean', 'null')
                        THEN 'has an isCreatedByUser that is neither true nor false'
                    WHEN v_recursive AND jsonb_typeof(f.message -> 'children') NOT IN ('array', 'null')
                        THEN 'has children that are not a list'
                    WHEN jsonb_typeof(f.message -> 'createdAt') NOT IN ('string', 'null')
                         OR (jsonb_typeof(f.message -> 'createdAt') = 'string' AND f.at IS NULL)
                        THEN 'has a createdAt that is not an ISO 8601 time'
                    END AS why
          FROM f
          LEFT JOIN ids d ON d.id = f.id
          LEFT JOIN ids p ON p.id = f.parent
    )
    SELECT (SELECT ARRAY[c.name, c.why] FROM c WHERE c.why IS NOT NULL ORDER BY c.seq LIMIT 1),
           (SELECT coalesce(jsonb_object_agg(c.id, jsonb_build_object('parent', c.parent, 'at', c.at, 'node', c.message)
                                                   || CASE WHEN c.listed THEN jsonb_build_object('children', coalesce(l.children, '[]'))
                                                           ELSE '{}' END), '{}')
              FROM c
              LEFT JOIN (SELECT f.nest_parent, jsonb_agg(f.id ORDER BY f.seq) AS children
                           FROM f WHERE f.nest_parent IS NOT NULL AND f.id IS NOT NULL GROUP BY f.nest_parent) l
                ON l.nest_parent = c.id
             WHERE c.id IS NOT NULL),
           (SELECT min(c.at) FROM c)
      INTO v_bad, v_nodes, v_time;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'LibreChat message % %', v_bad[1], v_bad[2]
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad[1]);
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'librechat', v_source, v_digest, v_nodes, NULL, v_time,
        jsonb_build_object('format', 'librechat', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'messages', 'requested_head', 'null'::jsonb),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_librechat(text, jsonb) IS
    'Import one LibreChat conversation export (recursive or flat; parentMessageId, the latest leaf as the head); a repeat returns the same id.';
