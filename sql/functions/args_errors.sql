-- args_errors: validates a JSON value against an argument schema (the
-- subset check_args_schema admits) inside the database. Returns one line per
-- failure, naming the JSON path and the rule ("$.amount_minor: minimum 1"),
-- or an empty array when the value is valid.
CREATE OR REPLACE FUNCTION convo.args_errors(p_schema jsonb, p_value jsonb, p_path text DEFAULT '$')
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_errors text[] := '{}';
    v_type   text := jsonb_typeof(p_value);
    v_types  jsonb;
    v_num    numeric;
    v_len    int;
    v_key    text;
    v_sub    jsonb;
    v_i      int;
BEGIN
    IF v_type = 'number' THEN
        v_num := p_value::text::numeric;
    END IF;
    IF p_schema ? 'type' THEN
        v_types := CASE jsonb_typeof(p_schema -> 'type') WHEN 'array' THEN p_schema -> 'type'
                                                         ELSE jsonb_build_array(p_schema -> 'type') END;
        IF NOT (v_types ? v_type OR (v_type = 'number' AND v_types ? 'integer' AND v_num = trunc(v_num))) THEN
            RETURN ARRAY[format('%s: type: expected %s, got %s', p_path,
                                array_to_string(ARRAY(SELECT jsonb_array_elements_text(v_types)), ' or '), v_type)];
        END IF;
    END IF;
    IF p_schema ? 'const' AND p_value <> p_schema -> 'const' THEN
        v_errors := v_errors || format('%s: const: must be %s', p_path, p_schema -> 'const');
    END IF;
    IF p_schema ? 'enum' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_schema -> 'enum') e WHERE e = p_value) THEN
        v_errors := v_errors || format('%s: enum: must be one of %s', p_path, p_schema -> 'enum');
    END IF;

    IF v_type = 'string' THEN
        v_len := length(p_value #>> '{}');
        IF v_len < (p_schema ->> 'minLength')::numeric THEN
            v_errors := v_errors || format('%s: minLength %s', p_path, p_schema -> 'minLength');
        END IF;
        IF v_len > (p_schema ->> 'maxLength')::numeric THEN
            v_errors := v_errors || format('%s: maxLength %s', p_path, p_schema -> 'maxLength');
        END IF;
        IF p_schema ? 'pattern' AND NOT (p_value #>> '{}') ~ (p_schema ->> 'pattern') THEN
            v_errors := v_errors || format('%s: pattern %s', p_path, p_schema -> 'pattern');
        END IF;
    ELSIF v_type = 'number' THEN
        IF v_num < (p_schema ->> 'minimum')::numeric THEN
            v_errors := v_errors || format('%s: minimum %s', p_path, p_schema -> 'minimum');
        END IF;
        IF v_num > (p_schema ->> 'maximum')::numeric THEN
            v_errors := v_errors || format('%s: maximum %s', p_path, p_schema -> 'maximum');
        END IF;
    ELSIF v_type = 'array' THEN
        v_len := jsonb_array_length(p_value);
        IF v_len < (p_schema ->> 'minItems')::numeric THEN
            v_errors := v_errors || format('%s: minItems %s', p_path, p_schema -> 'minItems');
        END IF;
        IF v_len > (p_schema ->> 'maxItems')::numeric THEN
            v_errors := v_errors || format('%s: maxItems %s', p_path, p_schema -> 'maxItems');
        END IF;
        IF p_schema ? 'items' THEN
            FOR v_sub, v_i IN SELECT e.value, e.ordinality - 1 FROM jsonb_array_elements(p_value) WITH ORDINALITY e LOOP
                v_errors := v_errors || convo.args_errors(p_schema -> 'items', v_sub, format('%s[%s]', p_path, v_i));
            END LOOP;
        END IF;
    ELSIF v_type = 'object' THEN
        FOR v_key IN SELECT jsonb_array_elements_text(p_schema -> 'required') LOOP
            IF NOT p_value ? v_key THEN
                v_errors := v_errors || format('%s: required', convo_private.json_path(p_path, v_key));
            END IF;
        END LOOP;
        FOR v_key, v_sub IN SELECT * FROM jsonb_each(p_value) LOOP
            IF p_schema -> 'properties' ? v_key THEN
                v_errors := v_errors || convo.args_errors(p_schema -> 'properties' -> v_key, v_sub, convo_private.json_path(p_path, v_key));
            ELSIF p_schema -> 'additionalProperties' = 'false' THEN
                v_errors := v_errors || format('%s: additionalProperties: not allowed', convo_private.json_path(p_path, v_key));
            END IF;
        END LOOP;
    END IF;
    RETURN v_errors;
END;
$$;

COMMENT ON FUNCTION convo.args_errors(jsonb, jsonb, text) IS
    'Validate a JSON value against an argument schema (the supported JSON Schema subset): one "path: rule" line per failure.';
