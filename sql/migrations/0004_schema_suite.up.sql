-- 0004_schema_suite: true and false are argument schemas and an empty enum
-- matches nothing; schemas and validated values are capped at 64 levels of
-- nesting, checked without recursion; args_errors refuses SQL NULL (CV011);
-- a tool call id is at most 255 characters (it is a btree key).

-- Act as the owner role: a migrating role that is not a superuser becomes
-- a member for this transaction only (it needs CREATEROLE for that).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- Table changes, written by hand, go here, above the objects that use them.

-- A tool's argument schema may be true or false as well as an object.
ALTER TABLE convo.tools DROP CONSTRAINT tools_args_schema_check;
ALTER TABLE convo.tools ADD CONSTRAINT tools_args_schema_check
    CHECK (jsonb_typeof(args_schema) IN ('object', 'boolean'));

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
            USING ERRCODE = 'CV011', HINT = 'JSON null is the jsonb value ''null'', not SQL NULL.';
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
        IF v_schema ? 'enum' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_schema -> 'enum') e WHERE e = v_value) THEN
            v_errors := v_errors || format('%s: enum: must be one of %s', v_path, v_schema -> 'enum');
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
            USING ERRCODE = 'CV011', HINT = 'Argument schemas and the values checked against them are capped at 64 levels of nesting.';
    END IF;
    WHILE v_top > 0 LOOP
        v_schema := v_schemas[v_top];
        v_path := v_paths[v_top];
        v_top := v_top - 1;
        CONTINUE WHEN jsonb_typeof(v_schema) = 'boolean';
        IF jsonb_typeof(v_schema) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'schema at % must be a JSON object, true or false', v_path USING ERRCODE = 'CV011';
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
                    USING ERRCODE = 'CV011',
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

-- message_parts_check: every part is well formed for its type and fits its
-- message's role, and is exactly the element of messages.parts it claims to
-- be (so the two never disagree); derives type, tool_call_id and tool_name
-- from the body (CHECK constraints tie them together).
CREATE OR REPLACE FUNCTION convo_private.message_parts_check()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_msg  convo.messages;
    v_body jsonb := NEW.body;
    v_type text;
    v_where text := format('message %s, part %s', NEW.message_id, NEW.ordinal);
BEGIN
    v_msg := convo_private.message_ref(NEW.conversation_id, NEW.message_id);
    IF v_msg.parts -> NEW.ordinal IS DISTINCT FROM v_body THEN
        RAISE EXCEPTION 'message parts are written with their message, as convo.messages.parts'
            USING ERRCODE = 'CV005', DETAIL = v_where;
    END IF;
    IF octet_length(v_body::text) > convo.max_part_bytes() THEN
        RAISE EXCEPTION 'a message part is larger than % bytes', convo.max_part_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', v_where, octet_length(v_body::text));
    END IF;
    IF jsonb_typeof(v_body) IS DISTINCT FROM 'object' OR jsonb_typeof(v_body -> 'type') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'a message part must be a JSON object with a string "type"'
            USING ERRCODE = 'CV008', DETAIL = v_where;
    END IF;
    v_type := v_body ->> 'type';
    IF v_type = 'text' THEN
        IF jsonb_typeof(v_body -> 'text') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'a text part needs a string "text"' USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSIF v_type = 'tool_use' THEN
        -- A tool call id is unique within its conversation through a btree
        -- index, whose entries are capped at about 2.7 kB: 255 characters
        -- (1020 bytes at most) stay well under it.
        IF jsonb_typeof(v_body -> 'id') IS DISTINCT FROM 'string' OR v_body ->> 'id' = '' OR length(v_body ->> 'id') > 255
           OR jsonb_typeof(v_body -> 'name') IS DISTINCT FROM 'string' OR v_body ->> 'name' = ''
           OR jsonb_typeof(v_body -> 'input') IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'a tool_use part needs a string "id" of 1 to 255 characters, a non-empty string "name" and an object "input"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        IF v_msg.role <> 'assistant' THEN
            RAISE EXCEPTION 'tool_use belongs in an assistant message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF octet_length((v_body -> 'input')::text) > convo.max_tool_input_bytes() THEN
            RAISE EXCEPTION 'a tool input is larger than % bytes', convo.max_tool_input_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF EXISTS (SELECT 1 FROM convo.message_parts p
                    WHERE p.conversation_id = NEW.conversation_id
                      AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'id') THEN
            RAISE EXCEPTION 'tool call id % is already used in this conversation', v_body ->> 'id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, conversation %s', v_where, v_body ->> 'id', NEW.conversation_id);
        END IF;
    ELSIF v_type = 'tool_result' THEN
        IF jsonb_typeof(v_body -> 'tool_use_id') IS DISTINCT FROM 'string' OR NOT v_body ? 'content'
           OR (v_body ? 'is_error' AND jsonb_typeof(v_body -> 'is_error') <> 'boolean') THEN
            RAISE EXCEPTION 'a tool_result part needs a string "tool_use_id", a "content" and, if given, a boolean "is_error"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        IF v_msg.role NOT IN ('user', 'tool') THEN
            RAISE EXCEPTION 'tool_result belongs in a user or tool message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = v_where;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM convo.message_parts p
                        WHERE p.conversation_id = NEW.conversation_id AND p.message_id = v_msg.parent_id
                          AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'tool_use_id') THEN
            RAISE EXCEPTION 'tool_result names tool call %, which is not a tool_use of the parent message', v_body ->> 'tool_use_id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, parent %s', v_where, v_body ->> 'tool_use_id', v_msg.parent_id);
        END IF;
    ELSIF v_type = 'attachment' THEN
        IF jsonb_typeof(v_body -> 'uri') IS DISTINCT FROM 'string' OR v_body ->> 'uri' = ''
           OR jsonb_typeof(v_body -> 'media_type') IS DISTINCT FROM 'string' OR v_body ->> 'media_type' = '' THEN
            RAISE EXCEPTION 'an attachment part needs a non-empty string "uri" and "media_type"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown message part type "%"', v_type
            USING ERRCODE = 'CV008', DETAIL = v_where,
                  HINT = 'Part types are text, tool_use, tool_result and attachment.';
    END IF;
    NEW.type := v_type;
    NEW.tool_call_id := CASE v_type WHEN 'tool_use' THEN v_body ->> 'id' WHEN 'tool_result' THEN v_body ->> 'tool_use_id' END;
    NEW.tool_name := CASE v_type WHEN 'tool_use' THEN v_body ->> 'name' END;
    RETURN NEW;
END;
$$;

-- receipt_arguments_error: why a receipt's arguments cannot be applied, or
-- NULL: 'invalid_arguments' when they fail the tool version's frozen
-- schema, else 'arg_mismatch' when a top-level key of the route's expected
-- values differs. Shared by fill_receipt and tool_receipts_transition, so a
-- direct UPDATE cannot mark bad arguments valid either; no arguments at all
-- (SQL NULL, which args_errors refuses with CV011) are invalid too.
CREATE OR REPLACE FUNCTION convo_private.receipt_arguments_error(
    p_tool_name    text,
    p_tool_version int,
    p_arguments    jsonb,
    p_expected     jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_arguments IS NULL THEN
        RETURN 'invalid_arguments';
    END IF;
    IF cardinality(convo.args_errors((SELECT t.args_schema FROM convo.tools t
                                       WHERE t.name = p_tool_name AND t.version = p_tool_version),
                                     p_arguments)) > 0 THEN
        RETURN 'invalid_arguments';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_each(p_expected) e WHERE p_arguments -> e.key IS DISTINCT FROM e.value) THEN
        RETURN 'arg_mismatch';
    END IF;
    RETURN NULL;
END;
$$;

SELECT convo_private.apply_grants();

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
