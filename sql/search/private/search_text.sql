-- search_text: what search finds in a message: the text of its text parts,
-- one a line (tool calls, results and attachments are not searched); ''
-- for a message without text. IMMUTABLE: search_document and the snippet
-- read the same text from the same parts. PL/pgSQL, not SQL: PostgreSQL 15
-- plans a SQL function's body again at every execution of the statement
-- that calls it (index_messages' INSERT, once a write), where PL/pgSQL
-- keeps its plan for the session.
CREATE OR REPLACE FUNCTION convo_private.search_text(p_parts jsonb)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT string_agg(e.part ->> 'text', E'\n' ORDER BY e.n)
                       FROM jsonb_array_elements(p_parts) WITH ORDINALITY AS e (part, n)
                      WHERE e.part ->> 'type' = 'text'), '');
END;
$$;
