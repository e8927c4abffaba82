-- request_messages: the path from the root to p_message_id (default the
-- head) as a provider's request messages, the body a generation is made
-- from. openai: the Chat Completions messages array; a message's tool
-- results become tool messages of their own, ahead of the rest of it (a
-- tool message's other parts become a user message). anthropic: {"system",
-- "messages"} as the Messages API takes it: system messages' text joined
-- into system (omitted when there is none; anything else in a system
-- message is CV011), tool messages user turns, consecutive turns of one role
-- merged into one, tool_result blocks first in a user turn. Parts render by
-- request_part. One owner check, the path read once.
CREATE OR REPLACE FUNCTION convo.request_messages(
    p_conversation_id uuid,
    p_message_id      uuid DEFAULT NULL,
    p_format          text DEFAULT 'openai')
RETURNS jsonb
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
DECLARE
    v_last  uuid;
    v_body  jsonb;
    v_stray uuid;
BEGIN
    IF p_format IS NULL OR p_format NOT IN ('openai', 'anthropic') THEN
        RAISE EXCEPTION 'unknown request format %', coalesce(quote_literal(p_format), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id),
                  HINT = 'Formats are openai and anthropic.';
    END IF;
    v_last := (convo_private.conversation_ref(p_conversation_id)).head_message_id;
    IF p_message_id IS NOT NULL THEN
        v_last := (convo_private.message_ref(p_conversation_id, p_message_id)).id;
    END IF;

    IF p_format = 'openai' THEN
        WITH p AS MATERIALIZED (SELECT * FROM convo_private.path_parts(p_conversation_id, v_last))
        SELECT coalesce(jsonb_agg(o.message ORDER BY o.depth, o.sub NULLS LAST), '[]') INTO v_body
          FROM (SELECT p.depth, p.part_ordinal AS sub, convo_private.request_part(p.part, 'openai') AS message
                  FROM p WHERE p.part ->> 'type' = 'tool_result'
                UNION ALL
                SELECT g.depth, NULL,
                       jsonb_build_object('role', CASE g.role WHEN 'tool' THEN 'user' ELSE g.role END,
                                          'content', CASE WHEN jsonb_array_length(g.content) = 1
                                                           AND g.content -> 0 ->> 'type' = 'text'
                                                          THEN g.content -> 0 -> 'text' ELSE g.content END)
                       || CASE WHEN g.tool_calls IS NULL THEN '{}'
                               ELSE jsonb_build_object('tool_calls', g.tool_calls) END
                  FROM (SELECT p.depth, p.role,
                               jsonb_agg(convo_private.request_part(p.part, 'openai') ORDER BY p.part_ordinal)
                                   FILTER (WHERE p.part ->> 'type' <> 'tool_use') AS content,
                               jsonb_agg(convo_private.request_part(p.part, 'openai') ORDER BY p.part_ordinal)
                                   FILTER (WHERE p.part ->> 'type' = 'tool_use') AS tool_calls
                          FROM p WHERE p.part ->> 'type' <> 'tool_result'
                         GROUP BY p.depth, p.role) g) o;
        RETURN v_body;
    END IF;

    WITH p AS MATERIALIZED (SELECT * FROM convo_private.path_parts(p_conversation_id, v_last)),
    -- Each message outside the system prompt, with its role in the API.
    msgs AS (SELECT p.depth, CASE p.role WHEN 'assistant' THEN 'assistant' ELSE 'user' END AS role
               FROM p WHERE p.role <> 'system' GROUP BY p.depth, p.role),
    -- A turn is a run of messages of one role: it starts where the role changes.
    turns AS (SELECT s.depth, s.role,
                     sum(CASE WHEN s.role IS DISTINCT FROM s.before THEN 1 ELSE 0 END) OVER (ORDER BY s.depth) AS turn
                FROM (SELECT msgs.depth, msgs.role, lag(msgs.role) OVER (ORDER BY msgs.depth) AS before FROM msgs) s)
    SELECT jsonb_build_object('messages', coalesce((
               SELECT jsonb_agg(jsonb_build_object('role', b.role, 'content', b.content) ORDER BY b.turn)
                 FROM (SELECT t.turn, min(t.role) AS role,
                              jsonb_agg(convo_private.request_part(p.part, 'anthropic')
                                        ORDER BY p.part ->> 'type' <> 'tool_result', p.depth, p.part_ordinal) AS content
                         FROM turns t JOIN p ON p.depth = t.depth
                        GROUP BY t.turn) b), '[]'))
           || coalesce((SELECT jsonb_build_object('system', string_agg(p.part ->> 'text', E'\n\n' ORDER BY p.depth, p.part_ordinal))
                          FROM p WHERE p.role = 'system' AND p.part ->> 'type' = 'text' HAVING count(*) > 0), '{}'),
           (SELECT p.message_id FROM p WHERE p.role = 'system' AND p.part ->> 'type' <> 'text' ORDER BY p.depth LIMIT 1)
      INTO v_body, v_stray;
    IF v_stray IS NOT NULL THEN
        RAISE EXCEPTION 'the anthropic format takes only text in a system message'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, message %s', p_conversation_id, v_stray),
                  HINT = 'The Messages API''s system is text; put the attachment in a user message.';
    END IF;
    RETURN v_body;
END;
$$;

COMMENT ON FUNCTION convo.request_messages(uuid, uuid, text) IS
    'The path root to p_message_id (default the head) as a provider''s request messages: openai (Chat Completions) or anthropic (Messages).';
