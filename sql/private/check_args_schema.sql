-- check_args_schema: refuses (CV011) an argument schema that uses anything
-- outside the supported JSON Schema subset, so that nothing a schema says is
-- silently left unchecked. Annotations are accepted and ignored.
CREATE OR REPLACE FUNCTION convo_private.check_args_schema(p_schema jsonb, p_path text DEFAULT '$')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key   text;
    v_value jsonb;
    v_bad   text;
BEGIN
    IF jsonb_typeof(p_schema) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'schema at % must be a JSON object', p_path USING ERRCODE = 'CV011';
    END IF;
    FOR v_key, v_value IN SELECT * FROM jsonb_each(p_schema) LOOP
        v_bad := NULL;
        CASE v_key
        WHEN 'title', 'description', '$comment', 'examples', 'default' THEN
            NULL;
        WHEN 'type' THEN
            IF NOT coalesce((CASE jsonb_typeof(v_value)
                                 WHEN 'string' THEN jsonb_build_array(v_value)
                                 WHEN 'array' THEN v_value END)
                            <@ '["object", "array", "string", "integer", "number", "boolean", "null"]', false)
               OR v_value = '[]' THEN
                v_bad := 'a type name or a non-empty list of them';
            END IF;
        WHEN 'properties' THEN
            IF jsonb_typeof(v_value) <> 'object' THEN
                v_bad := 'an object of schemas';
            ELSE
                PERFORM convo_private.check_args_schema(e.value, convo_private.json_path(p_path || '.properties', e.key))
                   FROM jsonb_each(v_value) e;
            END IF;
        WHEN 'items' THEN
            PERFORM convo_private.check_args_schema(v_value, p_path || '.items');
        WHEN 'required' THEN
            IF jsonb_typeof(v_value) <> 'array'
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(v_value) e WHERE jsonb_typeof(e) <> 'string') THEN
                v_bad := 'a list of property names';
            END IF;
        WHEN 'additionalProperties' THEN
            IF jsonb_typeof(v_value) <> 'boolean' THEN
                v_bad := 'true or false (schemas are not supported here)';
            END IF;
        WHEN 'enum' THEN
            IF jsonb_typeof(v_value) <> 'array' OR jsonb_array_length(v_value) = 0 THEN
                v_bad := 'a non-empty list of values';
            END IF;
        WHEN 'const' THEN
            NULL;
        WHEN 'minLength', 'maxLength', 'minItems', 'maxItems' THEN
            IF jsonb_typeof(v_value) <> 'number' OR v_value::text::numeric < 0
               OR v_value::text::numeric <> trunc(v_value::text::numeric) THEN
                v_bad := 'a non-negative integer';
            END IF;
        WHEN 'minimum', 'maximum' THEN
            IF jsonb_typeof(v_value) <> 'number' THEN
                v_bad := 'a number';
            END IF;
        WHEN 'pattern' THEN
            IF jsonb_typeof(v_value) <> 'string' THEN
                v_bad := 'a string';
            ELSE
                BEGIN
                    PERFORM '' ~ (v_value #>> '{}');
                EXCEPTION WHEN invalid_regular_expression THEN
                    v_bad := 'a valid PostgreSQL regular expression';
                END;
            END IF;
        ELSE
            RAISE EXCEPTION 'unsupported JSON Schema keyword "%" at %', v_key, p_path
                USING ERRCODE = 'CV011',
                      HINT = 'Supported: type, properties, required, additionalProperties (boolean), enum, const, '
                          || 'minLength, maxLength, pattern, minimum, maximum, items, minItems, maxItems; '
                          || 'annotations title, description, $comment, examples, default.';
        END CASE;
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'JSON Schema keyword "%" at % must be %', v_key, p_path, v_bad
                USING ERRCODE = 'CV011', DETAIL = format('%s: %s', v_key, v_value);
        END IF;
    END LOOP;
END;
$$;
