-- args_errors: validates a JSON value against an argument schema (the
-- subset check_args_schema admits, boolean schemas included) inside the
-- database. Returns one line per failure, naming the JSON path and the rule
-- ("$.amount_minor: minimum 1"), or an empty array when the value is valid.
-- It walks the schema and the value together with a stack of its own, not
-- by recursion, visiting each value at most once: linear in the value, and
-- no input can exhaust the server's stack. A value nested deeper than 64
-- levels of arrays and objects fails as a whole ("$: nesting: ...") before
-- any rule is looked at, whatever the schema. SQL NULL is no JSON value: CV011.
CREATE OR REPLACE FUNCTION convo.args_errors(p_schema jsonb, p_value jsonb, p_path text DEFAULT '$')
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_errors  text[] := '{}';
    -- The stack of (schema, value, path) still to check; v_top is its height.
    v_schemas jsonb[] := ARRAY[p_schema];
    v_values  jsonb[] := ARRAY[p_value];
    v_paths   text[] := ARRAY[p_path];
    v_top     int := 1;
    v_base    int;
    v_schema  jsonb;
    v_value   jsonb;
    v_path    text;
    v_type    text;
    v_types   jsonb;
    v_num     numeric;
    v_len     int;
    v_key     text;
    v_sub     jsonb;
    v_i       int;
    v_lo      int;
    v_hi      int;
BEGIN
    IF p_schema IS NULL OR p_value IS NULL OR p_path IS NULL THEN
        RAISE EXCEPTION 'p_schema, p_value and p_path are required'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s is SQL NULL', concat_ws(', ', CASE WHEN p_schema IS NULL THEN 'p_schema' END,
                                                          CASE WHEN p_value IS NULL THEN 'p_value' END,
                                                          CASE WHEN p_path IS NULL THEN 'p_path' END)),
                  HINT = 'JSON null is the jsonb value ''null'', not SQL NULL.';
    END IF;
    -- The nesting cap, measured by one bounded jsonpath walk (it looks no
    -- deeper than level 64): is there an array or object at level 64, that
    -- is, a 65th level of nesting?
    IF jsonb_path_exists(p_value, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') THEN
        RETURN ARRAY[format('%s: nesting: deeper than 64 levels of arrays and objects', p_path)];
    END IF;

    WHILE v_top > 0 LOOP
        v_schema := v_schemas[v_top];
        v_value := v_values[v_top];
        v_path := v_paths[v_top];
        v_top := v_top - 1;
        v_base := v_top;

        IF v_schema = 'true' THEN
            CONTINUE;
        ELSIF v_schema = 'false' THEN
            v_errors := v_errors || format('%s: false: no value is allowed', v_path);
            CONTINUE;
        END IF;

        v_type := jsonb_typeof(v_value);
        v_num := CASE WHEN v_type = 'number' THEN v_value::text::numeric END;
        IF v_schema ? 'type' THEN
            v_types := CASE jsonb_typeof(v_schema -> 'type') WHEN 'array' THEN v_schema -> 'type'
                                                             ELSE jsonb_build_array(v_schema -> 'type') END;
            IF NOT (v_types ? v_type OR (v_type = 'number' AND v_types ? 'integer' AND v_num = trunc(v_num))) THEN
                v_errors := v_errors || format('%s: type: expected %s, got %s', v_path,
                                               array_to_string(ARRAY(SELECT jsonb_array_elements_text(v_types)), ' or '), v_type);
                CONTINUE;
            END IF;
        END IF;
        -- jsonb's equality: numbers by value (1 = 1.0), objects whatever
        -- their key order, strings by code point.
        IF v_schema ? 'const' AND v_value <> v_schema -> 'const' THEN
            v_errors := v_errors || format('%s: const: must be %s', v_path, v_schema -> 'const');
        END IF;
        -- Nested, so that a schema without enum evaluates no query.
        IF v_schema ? 'enum' THEN
            IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_schema -> 'enum') e WHERE e = v_value) THEN
                v_errors := v_errors || format('%s: enum: must be one of %s', v_path, v_schema -> 'enum');
            END IF;
        END IF;

        IF v_type = 'string' THEN
            v_len := length(v_value #>> '{}');  -- characters (code points), not bytes
            IF v_len < (v_schema ->> 'minLength')::numeric THEN
                v_errors := v_errors || format('%s: minLength %s', v_path, v_schema -> 'minLength');
            END IF;
            IF v_len > (v_schema ->> 'maxLength')::numeric THEN
                v_errors := v_errors || format('%s: maxLength %s', v_path, v_schema -> 'maxLength');
            END IF;
            IF v_schema ? 'pattern' AND NOT (v_value #>> '{}') ~ (v_schema ->> 'pattern') THEN
                v_errors := v_errors || format('%s: pattern %s', v_path, v_schema -> 'pattern');
            END IF;
        ELSIF v_type = 'number' THEN
            IF v_num < (v_schema ->> 'minimum')::numeric THEN
                v_errors := v_errors || format('%s: minimum %s', v_path, v_schema -> 'minimum');
            END IF;
            IF v_num > (v_schema ->> 'maximum')::numeric THEN
                v_errors := v_errors || format('%s: maximum %s', v_path, v_schema -> 'maximum');
            END IF;
        ELSIF v_type = 'array' THEN
            v_len := jsonb_array_length(v_value);
            IF v_len < (v_schema ->> 'minItems')::numeric THEN
                v_errors := v_errors || format('%s: minItems %s', v_path, v_schema -> 'minItems');
            END IF;
            IF v_len > (v_schema ->> 'maxItems')::numeric THEN
                v_errors := v_errors || format('%s: maxItems %s', v_path, v_schema -> 'maxItems');
            END IF;
            IF v_schema ? 'items' AND v_schema -> 'items' <> 'true' THEN
                FOR v_sub, v_i IN SELECT e.value, e.ordinality - 1 FROM jsonb_array_elements(v_value) WITH ORDINALITY e LOOP
                    v_top := v_top + 1;
                    v_schemas[v_top] := v_schema -> 'items';
                    v_values[v_top] := v_sub;
                    v_paths[v_top] := format('%s[%s]', v_path, v_i);
                END LOOP;
            END IF;
        ELSIF v_type = 'object' THEN
            FOR v_key IN SELECT jsonb_array_elements_text(v_schema -> 'required') LOOP
                IF NOT v_value ? v_key THEN
                    v_errors := v_errors || format('%s: required', convo_private.json_path(v_path, v_key));
                END IF;
            END LOOP;
            FOR v_key, v_sub IN SELECT * FROM jsonb_each(v_value) LOOP
                IF v_schema -> 'properties' ? v_key THEN
                    v_top := v_top + 1;
                    v_schemas[v_top] := v_schema -> 'properties' -> v_key;
                    v_values[v_top] := v_sub;
                    v_paths[v_top] := convo_private.json_path(v_path, v_key);
                ELSIF v_schema -> 'additionalProperties' = 'false' THEN
                    v_errors := v_errors || format('%s: additionalProperties: not allowed', convo_private.json_path(v_path, v_key));
                END IF;
            END LOOP;
        END IF;

        -- The children were pushed in document order: reverse them on the
        -- stack, so that they are checked, and their errors listed, in it.
        v_lo := v_base + 1;
        v_hi := v_top;
        WHILE v_lo < v_hi LOOP
            v_schema := v_schemas[v_lo]; v_schemas[v_lo] := v_schemas[v_hi]; v_schemas[v_hi] := v_schema;
            v_value := v_values[v_lo];   v_values[v_lo] := v_values[v_hi];   v_values[v_hi] := v_value;
            v_path := v_paths[v_lo];     v_paths[v_lo] := v_paths[v_hi];     v_paths[v_hi] := v_path;
            v_lo := v_lo + 1;
            v_hi := v_hi - 1;
        END LOOP;
    END LOOP;
    RETURN v_errors;
END;
$$;

COMMENT ON FUNCTION convo.args_errors(jsonb, jsonb, text) IS
    'Validate a JSON value against an argument schema (the supported JSON Schema subset): one "path: rule" line per failure.';
