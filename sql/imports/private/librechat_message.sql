-- librechat_message: the role and parts of an imported LibreChat message:
-- user when isCreatedByUser is true, else assistant (sender is a display
-- label, kept in the origin only). A non-empty content array (what the UI
-- shows when present) gives one part per element: a text part for
-- {"type": "text"} with a string text or text.value, else a text part that
-- says so and holds the element; otherwise one text part with text
-- (missing or null: empty; not a string: a part that says so), then, for
-- a content that is neither an array nor null, a part that holds it.
CREATE OR REPLACE FUNCTION convo_private.librechat_message(p_message jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    SELECT jsonb_build_object('role', CASE WHEN p_message -> 'isCreatedByUser' = 'true' THEN 'user' ELSE 'assistant' END,
        'parts', CASE
            WHEN jsonb_typeof(p_message -> 'content') = 'array' AND jsonb_array_length(p_message -> 'content') > 0
                THEN (SELECT jsonb_agg(jsonb_build_object('type', 'text', 'text', CASE
                                 WHEN c.part ->> 'type' = 'text' AND jsonb_typeof(c.part -> 'text') = 'string'
                                     THEN c.part ->> 'text'
                                 WHEN c.part ->> 'type' = 'text' AND jsonb_typeof(c.part -> 'text' -> 'value') = 'string'
                                     THEN c.part -> 'text' ->> 'value'
                                 ELSE '[unmapped librechat part '
                                      || coalesce(convo_private.nonempty_text(c.part -> 'type'), jsonb_typeof(c.part))
                                      || '] ' || c.part::text END) ORDER BY c.n)
                        FROM jsonb_array_elements(p_message -> 'content') WITH ORDINALITY AS c (part, n))
            ELSE jsonb_build_array(jsonb_build_object('type', 'text', 'text', CASE
                         WHEN jsonb_typeof(p_message -> 'text') = 'string' THEN p_message ->> 'text'
                         WHEN coalesce(jsonb_typeof(p_message -> 'text'), 'null') = 'null' THEN ''
                         ELSE '[unmapped librechat text] ' || (p_message -> 'text')::text END))
                 || CASE WHEN coalesce(jsonb_typeof(p_message -> 'content'), 'null') IN ('null', 'array') THEN '[]'::jsonb
                         ELSE jsonb_build_array(jsonb_build_object('type', 'text', 'text',
                                  '[unmapped librechat content] ' || (p_message -> 'content')::text)) END
            END);
END;
