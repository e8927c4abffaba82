-- json_path: the JSON path of an object member, as validation errors name
-- it: $.amount_minor, $["odd key"] (elements are written $.items[2]).
-- PL/pgSQL, as search_text: to_jsonb is only STABLE, so PostgreSQL does not
-- inline it, and would plan it again in every transaction that validates.
CREATE OR REPLACE FUNCTION convo_private.json_path(p_parent text, p_key text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN p_parent || CASE WHEN p_key ~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN '.' || p_key
                            ELSE '[' || to_jsonb(p_key)::text || ']' END;
END;
$$;
