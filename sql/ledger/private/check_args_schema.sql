-- check_args_schema: refuses (CV011) an argument schema that uses anything
-- outside the supported JSON Schema subset, so that nothing a schema says is
-- silently left unchecked. Annotations are accepted and ignored; true and
-- false are schemas, at the root and wherever a subschema goes. A schema
-- nested deeper than 64 levels of arrays and objects is refused before it is
-- walked, and the walk keeps a stack of its own instead of recursing, so no
-- schema can exhaust the server's stack.
CREATE OR REPLACE FUNCTION convo_private.check_args_schema(p_schema jsonb, p_path text DEFAULT '$')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- The (sub)schemas still to check, and where they are; v_top is the height.
    v_schemas jsonb[] := ARRAY[p_schema];
    v_paths   text[] := ARRAY[p_path];
    v_top     int := 1;
    v_schema  jsonb;
    v_path    text;
    v_key     text;
    v_value   jsonb;
    v_sub     jsonb;
    v_name    text;
    v_bad     text;
BEGIN
    IF jsonb_path_exists(p_schema, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') THEN
        RAISE EXCEPTION 'the schema at % is nested deeper than 64 levels of arrays and objects', p_path
            USING ERRCODE = 'CV011', DETAIL = format('schema path %s', p_path),
                  HINT = 'Argument schemas and the values checked against them are capped at 64 levels of nesting.';
    END IF;
    WHILE v_top > 0 LOOP
        v_schema := v_schemas[v_top];
        v_path := v_paths[v_top];
        v_top := v_top - 1;
        CONTINUE WHEN jsonb_typeof(v_schema) = 'boolean';
        IF jsonb_typeof(v_schema) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'schema at % must be a JSON object, true or false', v_path
                USING ERRCODE = 'CV011', DETAIL = format('schema path %s, a %s', v_path, jsonb_typeof(v_schema));
        END IF;
        FOR v_key, v_value IN SELECT * FROM jsonb_each(v_schema) LOOP
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
                    FOR v_name, v_sub IN SELECT * FROM jsonb_each(v_value) LOOP
                        v_top := v_top + 1;
                        v_schemas[v_top] := v_sub;
                        v_paths[v_top] := convo_private.json_path(v_path || '.properties', v_name);
                    END LOOP;
                END IF;
            WHEN 'items' THEN
                v_top := v_top + 1;
                v_schemas[v_top] := v_value;
                v_paths[v_top] := v_path || '.items';
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
                IF jsonb_typeof(v_value) <> 'array' THEN
                    v_bad := 'a list of values (an empty one matches nothing)';
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
                RAISE EXCEPTION 'unsupported JSON Schema keyword "%" at %', v_key, v_path
                    USING ERRCODE = 'CV011', DETAIL = format('schema path %s, keyword %s', v_path, v_key),
                          HINT = 'Supported: type, properties, required, additionalProperties (boolean), enum, const, '
                              || 'minLength, maxLength, pattern, minimum, maximum, items (one schema), minItems, maxItems; '
                              || 'annotations title, description, $comment, examples, default; true and false as schemas.';
            END CASE;
            IF v_bad IS NOT NULL THEN
                RAISE EXCEPTION 'JSON Schema keyword "%" at % must be %', v_key, v_path, v_bad
                    USING ERRCODE = 'CV011', DETAIL = format('%s: %s', v_key, v_value);
            END IF;
        END LOOP;
    END LOOP;
END;
$$;
