-- chatgpt_message: the role and parts of an imported ChatGPT message
-- (docs/importing.md, "Roles" and "Parts"), given its imported parent: a tool call
-- is one tool_use (id: the node key, input: the whole content); a tool
-- message answering its parent's call is a tool_result (content: the whole
-- content) and its images; anything else is chatgpt_render's parts, with
-- user and model context as system messages. Then the code interpreter's
-- images and the attachments no image names. Only the four part types.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_message(p_key text, p_message jsonb, p_parent_key text, p_parent jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role    text := p_message -> 'author' ->> 'role';
    v_content jsonb := p_message -> 'content';
    v_ct      text := p_message -> 'content' ->> 'content_type';
    v_meta    jsonb := CASE WHEN jsonb_typeof(p_message -> 'metadata') = 'object' THEN p_message -> 'metadata' ELSE '{}' END;
    v_items   jsonb;
BEGIN
    IF convo_private.chatgpt_is_call(p_message) THEN
        RETURN jsonb_build_object('role', 'assistant', 'parts', jsonb_build_array(jsonb_build_object(
            'type', 'tool_use', 'id', p_key, 'name', p_message ->> 'recipient', 'input', v_content)));
    END IF;
    IF v_role = 'tool' AND convo_private.chatgpt_is_call(p_parent)
       AND (jsonb_typeof(p_message -> 'author' -> 'name') IS DISTINCT FROM 'string'
            OR p_message -> 'author' ->> 'name' = p_parent ->> 'recipient') THEN
        v_items := jsonb_build_array(jsonb_build_object('type', 'tool_result', 'tool_use_id', p_parent_key, 'content', v_content,
                       'is_error', v_ct = 'system_error'
                                   OR coalesce(convo_private.nonempty_text(v_meta -> 'aggregate_result' -> 'status'), 'success') <> 'success'))
                   || coalesce((SELECT jsonb_agg(jsonb_build_object('pointer', x.e ->> 'asset_pointer') ORDER BY x.n)
                                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_content -> 'parts') = 'array'
                                                                 THEN v_content -> 'parts' ELSE '[]'::jsonb END) WITH ORDINALITY AS x (e, n)
                                 WHERE convo_private.nonempty_text(x.e -> 'asset_pointer') IS NOT NULL), '[]'::jsonb);
    ELSE
        v_items := convo_private.chatgpt_render(v_content);
        IF v_ct IN ('user_editable_context', 'model_editable_context') THEN
            v_role := 'system';
        END IF;
    END IF;
    v_items := v_items || coalesce((SELECT jsonb_agg(jsonb_build_object('pointer', x.e ->> 'image_url') ORDER BY x.n)
                                      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_meta -> 'aggregate_result' -> 'messages') = 'array'
                                                                     THEN v_meta -> 'aggregate_result' -> 'messages' ELSE '[]'::jsonb END)
                                           WITH ORDINALITY AS x (e, n)
                                     WHERE convo_private.nonempty_text(x.e -> 'image_url') IS NOT NULL), '[]'::jsonb);
    RETURN jsonb_build_object('role', v_role, 'parts', convo_private.chatgpt_attach(v_items, v_meta -> 'attachments'));
END;
$$;
