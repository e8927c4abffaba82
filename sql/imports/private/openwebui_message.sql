-- openwebui_message: the role and parts of an imported Open WebUI message
-- (docs/importing.md, "Parts"): its content verbatim as one text part (inline
-- <details> blocks included: they are not split into tool calls), then one
-- part per element of files (openwebui_file). Content that is not a string
-- (or files that are not a list) becomes a text part that says so and holds it.
CREATE OR REPLACE FUNCTION convo_private.openwebui_message(p_message jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    SELECT jsonb_build_object('role', p_message ->> 'role', 'parts',
        jsonb_build_array(CASE WHEN jsonb_typeof(p_message -> 'content') = 'string'
                               THEN jsonb_build_object('type', 'text', 'text', p_message ->> 'content')
                               WHEN p_message -> 'content' IS NULL THEN jsonb_build_object('type', 'text', 'text', '')
                               ELSE jsonb_build_object('type', 'text', 'text',
                                        '[unmapped openwebui content] ' || (p_message -> 'content')::text) END)
        || CASE coalesce(jsonb_typeof(p_message -> 'files'), 'null')
               WHEN 'array' THEN coalesce((SELECT jsonb_agg(convo_private.openwebui_file(f.e) ORDER BY f.n)
                                             FROM jsonb_array_elements(p_message -> 'files') WITH ORDINALITY AS f (e, n)), '[]'::jsonb)
               WHEN 'null' THEN '[]'::jsonb
               ELSE jsonb_build_array(jsonb_build_object('type', 'text', 'text',
                        '[unmapped openwebui file] ' || (p_message -> 'files')::text)) END);
END;
