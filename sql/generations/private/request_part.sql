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
