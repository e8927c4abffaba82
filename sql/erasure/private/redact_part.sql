-- redact_part: what erasure leaves of one message part: its type, its ids
-- (a tool call's id and tool name, a result's tool_use_id and is_error) and
-- the keys that keep it well formed, emptied, with "erased": true. Every
-- other key goes. Idempotent, so a second erasure changes nothing.
CREATE OR REPLACE FUNCTION convo_private.redact_part(p_part jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN CASE p_part ->> 'type'
    WHEN 'text' THEN jsonb_build_object('type', 'text', 'text', '')
    WHEN 'tool_use' THEN jsonb_build_object('type', 'tool_use', 'id', p_part -> 'id', 'name', p_part -> 'name',
                                            'input', '{}'::jsonb)
    WHEN 'tool_result' THEN jsonb_build_object('type', 'tool_result', 'tool_use_id', p_part -> 'tool_use_id',
                                               'content', '')
                            || CASE WHEN p_part ? 'is_error' THEN jsonb_build_object('is_error', p_part -> 'is_error')
                                    ELSE '{}' END
    WHEN 'attachment' THEN jsonb_build_object('type', 'attachment', 'uri', '', 'media_type', p_part -> 'media_type')
    ELSE jsonb_build_object('type', p_part -> 'type')
END || '{"erased": true}';
