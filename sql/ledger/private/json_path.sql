-- json_path: the JSON path of an object member, as validation errors name
-- it: $.amount_minor, $["odd key"] (elements are written $.items[2]).
CREATE OR REPLACE FUNCTION convo_private.json_path(p_parent text, p_key text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN p_parent || CASE WHEN p_key ~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN '.' || p_key
                        ELSE '[' || to_jsonb(p_key)::text || ']' END;
