-- chatgpt_render: a ChatGPT message's content as parts, by content type
-- (docs/importing.md, "Parts"), as a JSON array of items: a part, or
-- {"pointer": uri} for an image asset, which chatgpt_attach makes an
-- attachment. Never empty. A content type it does not know, or one whose
-- field has an unexpected type, becomes one text part that says so and
-- holds the whole content; an element it does not know, one that holds the element.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_render(p_content jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ct    text := p_content ->> 'content_type';
    v_field text := CASE WHEN v_ct IN ('text', 'multimodal_text') THEN 'parts'
                         WHEN v_ct IN ('code', 'execution_output', 'tether_quote', 'sonic_webpage', 'system_error') THEN 'text'
                         WHEN v_ct = 'tether_browsing_display' THEN 'result'
                         WHEN v_ct = 'reasoning_recap' THEN 'content'
                         WHEN v_ct = 'thoughts' THEN 'thoughts'
                         WHEN v_ct = 'model_editable_context' THEN 'model_set_context' END;
    v_kind  text := coalesce(jsonb_typeof(p_content -> v_field), 'null');
    v_out   jsonb;
BEGIN
    IF v_field IN ('parts', 'thoughts') AND v_kind IN ('array', 'null') THEN
        SELECT jsonb_agg(CASE
                   WHEN v_field = 'parts' AND jsonb_typeof(x.e) = 'string'
                       THEN jsonb_build_object('type', 'text', 'text', x.e #>> '{}')
                   WHEN v_ct = 'multimodal_text' AND convo_private.nonempty_text(x.e -> 'asset_pointer') IS NOT NULL
                       THEN jsonb_build_object('pointer', x.e ->> 'asset_pointer')
                   WHEN v_ct = 'multimodal_text' AND x.e ->> 'content_type' = 'audio_transcription'
                       THEN jsonb_build_object('type', 'text', 'text', coalesce(x.e ->> 'text', ''))
                   WHEN v_field = 'thoughts' AND jsonb_typeof(x.e) = 'object'
                       THEN jsonb_build_object('type', 'text', 'text',
                                CASE WHEN coalesce(x.e ->> 'content', '') = '' THEN coalesce(x.e ->> 'summary', '')
                                     ELSE coalesce(x.e ->> 'summary', '') || E'\n\n' || (x.e ->> 'content') END)
                   ELSE jsonb_build_object('type', 'text', 'text', '[unmapped chatgpt part '
                            || coalesce(x.e ->> 'content_type', jsonb_typeof(x.e)) || '] ' || x.e::text)
               END ORDER BY x.n)
          INTO v_out
          FROM jsonb_array_elements(CASE WHEN v_kind = 'array' THEN p_content -> v_field ELSE '[]'::jsonb END)
               WITH ORDINALITY AS x (e, n);
        RETURN coalesce(v_out, '[{"type": "text", "text": ""}]'::jsonb);
    ELSIF v_field IS NOT NULL AND v_kind IN ('string', 'null') THEN
        RETURN jsonb_build_array(jsonb_build_object('type', 'text', 'text', coalesce(p_content ->> v_field, '')));
    ELSIF v_ct = 'user_editable_context' THEN
        RETURN jsonb_build_array(jsonb_build_object('type', 'text', 'text', coalesce(p_content ->> 'user_profile', '')),
                                 jsonb_build_object('type', 'text', 'text', coalesce(p_content ->> 'user_instructions', '')));
    END IF;
    RETURN jsonb_build_array(jsonb_build_object('type', 'text', 'text',
        '[unmapped chatgpt content_type ' || coalesce(v_ct, 'null') || '] ' || p_content::text));
END;
$$;
