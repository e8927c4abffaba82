-- part_problem: what is wrong with one message part for a message of
-- p_role, as {SQLSTATE, message, what to add to the DETAIL, hint}, or NULL: the
-- one rule of a well-formed part (the contract's four types, their keys,
-- the caps, which roles carry tool calls and results). write_messages
-- checks every part of a write with it, set-based; messages_guard checks a
-- direct insert with it. What needs other rows (a tool call id unique in
-- the conversation, a result naming its parent's call) is write_messages'.
-- SQL with no SET clause and STABLE (format() is), so it is inlined into
-- those queries.
CREATE OR REPLACE FUNCTION convo_private.part_problem(p_part jsonb, p_role text)
RETURNS text[]
LANGUAGE sql
STABLE
RETURN CASE
    WHEN octet_length(p_part::text) > convo.max_part_bytes()
        THEN ARRAY['CV010', format('a message part is larger than %s bytes', convo.max_part_bytes()),
                   format(': %s bytes', octet_length(p_part::text)), '']
    WHEN jsonb_typeof(p_part) IS DISTINCT FROM 'object' OR jsonb_typeof(p_part -> 'type') IS DISTINCT FROM 'string'
        THEN ARRAY['CV008', 'a message part must be a JSON object with a string "type"', '', '']
    WHEN p_part ->> 'type' = 'text' THEN
        CASE WHEN jsonb_typeof(p_part -> 'text') IS DISTINCT FROM 'string'
             THEN ARRAY['CV008', 'a text part needs a string "text"', '', ''] END
    WHEN p_part ->> 'type' = 'tool_use' THEN CASE
        WHEN jsonb_typeof(p_part -> 'id') IS DISTINCT FROM 'string' OR p_part ->> 'id' = ''
             OR jsonb_typeof(p_part -> 'name') IS DISTINCT FROM 'string' OR p_part ->> 'name' = ''
             OR jsonb_typeof(p_part -> 'input') IS DISTINCT FROM 'object'
            THEN ARRAY['CV008', 'a tool_use part needs a non-empty string "id" and "name" and an object "input"', '', '']
        -- A tool call id is unique through a btree index, whose entries are
        -- capped at about 2.7 kB: 255 characters (1020 bytes at most) fit.
        WHEN length(p_part ->> 'id') > convo_private.max_id_length()
            THEN ARRAY['CV010', format('a tool call id is at most %s characters', convo_private.max_id_length()),
                       format(', a tool call id of %s characters', length(p_part ->> 'id')), '']
        WHEN p_role IS DISTINCT FROM 'assistant'
            THEN ARRAY['CV004', format('tool_use belongs in an assistant message, not a %s message', p_role),
                       format(', tool call %s', p_part ->> 'id'), '']
        WHEN octet_length((p_part -> 'input')::text) > convo.max_tool_input_bytes()
            THEN ARRAY['CV010', format('a tool input is larger than %s bytes', convo.max_tool_input_bytes()),
                       format(', tool call %s', p_part ->> 'id'), '']
        END
    WHEN p_part ->> 'type' = 'tool_result' THEN CASE
        WHEN jsonb_typeof(p_part -> 'tool_use_id') IS DISTINCT FROM 'string' OR NOT p_part ? 'content'
             OR (p_part ? 'is_error' AND jsonb_typeof(p_part -> 'is_error') <> 'boolean')
            THEN ARRAY['CV008', 'a tool_result part needs a string "tool_use_id", a "content" and, if given, a boolean "is_error"', '', '']
        WHEN length(p_part ->> 'tool_use_id') > convo_private.max_id_length()
            THEN ARRAY['CV010', format('a tool call id is at most %s characters', convo_private.max_id_length()),
                       format(', a tool_use_id of %s characters', length(p_part ->> 'tool_use_id')), '']
        WHEN p_role IS NULL OR p_role NOT IN ('user', 'tool')
            THEN ARRAY['CV004', format('tool_result belongs in a user or tool message, not a %s message', p_role), '', '']
        END
    WHEN p_part ->> 'type' = 'attachment' THEN
        CASE WHEN jsonb_typeof(p_part -> 'uri') IS DISTINCT FROM 'string' OR p_part ->> 'uri' = ''
                  OR jsonb_typeof(p_part -> 'media_type') IS DISTINCT FROM 'string' OR p_part ->> 'media_type' = ''
             THEN ARRAY['CV008', 'an attachment part needs a non-empty string "uri" and "media_type"', '', ''] END
    ELSE ARRAY['CV008', format('unknown message part type "%s"', p_part ->> 'type'), '',
                'Part types are text, tool_use, tool_result and attachment.']
END;
