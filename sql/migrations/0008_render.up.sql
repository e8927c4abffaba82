-- 0008_render: the request the model saw: a path rendered as a provider's request
-- messages (openai, anthropic) and the SHA-256 of that body for begin_generation.

-- Act as the owner role: a migrating role that is not a superuser becomes
-- a member for this transaction only (it needs CREATEROLE for that).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- Table changes, written by hand, go here, above the objects that use them.

-- request_digest: the SHA-256, in lower-case hex, of request_messages' body
-- in its canonical text, jsonb's own output (keys in jsonb's order, one
-- space after each colon and comma), as UTF-8: what an application passes
-- to begin_generation(p_request_digest => ...), so an audit can tell
-- whether a reply was made from exactly the stored path.
CREATE OR REPLACE FUNCTION convo.request_digest(
    p_conversation_id uuid,
    p_message_id      uuid DEFAULT NULL,
    p_format          text DEFAULT 'openai')
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN encode(sha256(convert_to(convo.request_messages(p_conversation_id, p_message_id, p_format)::text, 'UTF8')), 'hex');
END;
$$;

COMMENT ON FUNCTION convo.request_digest(uuid, uuid, text) IS
    'SHA-256 (hex) of request_messages'' jsonb text: the p_request_digest of begin_generation, for auditing a reply against the stored path.';

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

-- path_parts: the parts of every message on the path from the root to
-- p_head_id, one row a part, with its message's depth, id and role: the
-- path read once (path_segments, one index range scan per branch point)
-- and each message's stored parts unnested, for the request renderings.
CREATE OR REPLACE FUNCTION convo_private.path_parts(p_conversation_id uuid, p_head_id uuid)
RETURNS TABLE (depth int, message_id uuid, role text, part_ordinal bigint, part jsonb)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT m.depth, m.id, m.role, e.part_ordinal, e.part
      FROM convo_private.path_segments(p_conversation_id, p_head_id) s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     CROSS JOIN LATERAL jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, part_ordinal);
END;
$$;

-- documented_grants: every privilege pgconvo grants, as data (the README's
-- "Security" section in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's (the allowlist, the
-- sweeps, erasure) for convo_admin, a member of both; SELECT on the views
-- for convo_app, on every table and view for convo_reader. Nothing for
-- PUBLIC, nothing at all on convo_private. A function added later is nobody's until it is listed here.
-- apply_grants makes the catalog say exactly this; self_check compares.
CREATE OR REPLACE FUNCTION convo_private.documented_grants()
RETURNS TABLE (object_kind text, object_name text, grantee text, privilege text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'SCHEMA', 'convo', r.grantee, 'USAGE'
      FROM unnest(ARRAY['convo_app', 'convo_reader', 'convo_admin']) AS r (grantee)
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, g.grantee, 'EXECUTE'
      FROM pg_proc p
      JOIN (VALUES ('convo_app', ARRAY['create_conversation', 'append_message', 'edit_and_resend', 'regenerate',
                                       'move_head', 'path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                       'begin_generation', 'complete_generation', 'fail_generation',
                                       'cancel_generation', 'effect_for_call', 'settle_effect', 'compensate_effect',
                                       'confirm_effect', 'decline_effect', 'begin_receipt', 'fill_receipt',
                                       'apply_receipt', 'fail_receipt', 'args_errors', 'generation_stale_after',
                                       'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                       'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                       'max_ref_length', 'request_messages', 'request_digest']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length', 'request_messages', 'request_digest']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts', 'erase_conversation', 'erase_owner'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace;
END;

-- request_part: one stored part as a provider's request carries it.
-- openai (Chat Completions): text and attachments are content parts (an
-- image an image_url, anything else a file: file_data for a data: URI, else
-- the uri as an uploaded file's file_id); a tool_use is an entry of the
-- assistant's tool_calls, its input as JSON text in function.arguments; a
-- tool_result is a tool message. anthropic (Messages): content blocks (an
-- attachment an image or document block, a data: URI with ;base64 as a
-- base64 source, else a url source); is_error kept as stored. A result's
-- content stays a string if it is one, else becomes its JSON text. STABLE
-- as jsonb_build_object is, so the planner inlines it into the caller's
-- query instead of calling it once a part.
CREATE OR REPLACE FUNCTION convo_private.request_part(p_part jsonb, p_format text)
RETURNS jsonb
LANGUAGE sql
STABLE
RETURN CASE p_format || ':' || (p_part ->> 'type')
    WHEN 'openai:text' THEN jsonb_build_object('type', 'text', 'text', p_part -> 'text')
    WHEN 'openai:attachment' THEN CASE
        WHEN lower(p_part ->> 'media_type') LIKE 'image/%' THEN
            jsonb_build_object('type', 'image_url', 'image_url', jsonb_build_object('url', p_part -> 'uri'))
        WHEN p_part ->> 'uri' LIKE 'data:%' THEN
            jsonb_build_object('type', 'file', 'file', jsonb_build_object('file_data', p_part -> 'uri')
                || CASE WHEN jsonb_typeof(p_part -> 'filename') = 'string'
                        THEN jsonb_build_object('filename', p_part -> 'filename') ELSE '{}' END)
        ELSE jsonb_build_object('type', 'file', 'file', jsonb_build_object('file_id', p_part -> 'uri'))
    END
    WHEN 'openai:tool_use' THEN
        jsonb_build_object('id', p_part -> 'id', 'type', 'function',
                           'function', jsonb_build_object('name', p_part -> 'name',
                                                          'arguments', (p_part -> 'input')::text))
    WHEN 'openai:tool_result' THEN
        jsonb_build_object('role', 'tool', 'tool_call_id', p_part -> 'tool_use_id',
                           'content', CASE jsonb_typeof(p_part -> 'content') WHEN 'string' THEN p_part -> 'content'
                                           ELSE to_jsonb((p_part -> 'content')::text) END)
    WHEN 'anthropic:text' THEN jsonb_build_object('type', 'text', 'text', p_part -> 'text')
    WHEN 'anthropic:attachment' THEN
        jsonb_build_object('type', CASE WHEN lower(p_part ->> 'media_type') LIKE 'image/%' THEN 'image' ELSE 'document' END,
                           'source', CASE WHEN p_part ->> 'uri' ~* '^data:[^,]*;base64,'
                                          THEN jsonb_build_object('type', 'base64', 'media_type', p_part -> 'media_type',
                                                                  'data', substr(p_part ->> 'uri', strpos(p_part ->> 'uri', ',') + 1))
                                          ELSE jsonb_build_object('type', 'url', 'url', p_part -> 'uri') END)
    WHEN 'anthropic:tool_use' THEN
        jsonb_build_object('type', 'tool_use', 'id', p_part -> 'id', 'name', p_part -> 'name', 'input', p_part -> 'input')
    WHEN 'anthropic:tool_result' THEN
        jsonb_build_object('type', 'tool_result', 'tool_use_id', p_part -> 'tool_use_id',
                           'content', CASE jsonb_typeof(p_part -> 'content') WHEN 'string' THEN p_part -> 'content'
                                           ELSE to_jsonb((p_part -> 'content')::text) END)
        || CASE WHEN p_part ? 'is_error' THEN jsonb_build_object('is_error', p_part -> 'is_error') ELSE '{}' END
END;

SELECT convo_private.apply_grants();

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
