-- nonempty_text: the text of a JSON value that is a non-empty string, else
-- NULL: how the import functions read an optional field of a source file.
CREATE OR REPLACE FUNCTION convo_private.nonempty_text(p_value jsonb)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(p_value) = 'string' AND p_value #>> '{}' <> '' THEN p_value #>> '{}' END;
