-- search_text: what search finds in a message: the text of its text parts,
-- one a line (tool calls, results and attachments are not searched); ''
-- for a message without text. IMMUTABLE: search_document and the snippet
-- read the same text from the same parts.
CREATE OR REPLACE FUNCTION convo_private.search_text(p_parts jsonb)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN coalesce((SELECT string_agg(e.part ->> 'text', E'\n' ORDER BY e.n)
                   FROM jsonb_array_elements(p_parts) WITH ORDINALITY AS e (part, n)
                  WHERE e.part ->> 'type' = 'text'), '');
