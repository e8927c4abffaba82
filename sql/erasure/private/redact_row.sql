-- redact_row: what erasure leaves of a row of a table that holds content,
-- the row given and returned as jsonb: the one place that says what erasure
-- redacts. It keeps the shape (ids, times, states, amounts, currencies,
-- external references, who did what) and empties the content: message parts
-- (their one copy, the message's array), conversation metadata, its title
-- and the titles in its change log,
-- generation params, request digest, usage and error detail, effect
-- arguments, event evidence, an imported message's source node, an
-- import's source key and digest, a receipt's request, its digest (keyed,
-- but of the request alone, so equal for every owner's equal request), its
-- arguments and expected values. Idempotent. erase_content,
-- the one place that updates content, writes it.
CREATE OR REPLACE FUNCTION convo_private.redact_row(p_table text, p_row jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN p_row || CASE p_table
    WHEN 'messages' THEN jsonb_build_object('parts',
        (SELECT jsonb_agg(convo_private.redact_part(e.part) ORDER BY e.n)
           FROM jsonb_array_elements(p_row -> 'parts') WITH ORDINALITY AS e (part, n)))
    WHEN 'conversations' THEN '{"metadata": {}, "title": null}'::jsonb
    WHEN 'conversation_changes' THEN CASE WHEN p_row ->> 'field' = 'title'
                                          THEN '{"old_value": null, "new_value": null}'::jsonb ELSE '{}'::jsonb END
    WHEN 'generations' THEN jsonb_build_object('params', '{}'::jsonb, 'request_digest', NULL,
        'usage', CASE WHEN jsonb_typeof(p_row -> 'usage') <> 'null' THEN '{}'::jsonb END,
        'error', CASE WHEN jsonb_typeof(p_row -> 'error') <> 'null' THEN '{}'::jsonb END)
    WHEN 'tool_effects' THEN '{"arguments": {}}'::jsonb
    WHEN 'tool_effect_events' THEN '{"evidence": {}}'::jsonb
    WHEN 'import_origins' THEN '{"node": {"erased": true}}'::jsonb
    WHEN 'imports' THEN '{"source_key": null, "digest": null}'::jsonb
    WHEN 'tool_receipts' THEN jsonb_build_object('request', '{}'::jsonb, 'request_digest', NULL,
        'arguments', CASE WHEN jsonb_typeof(p_row -> 'arguments') <> 'null' THEN '{}'::jsonb END,
        'expected', CASE WHEN jsonb_typeof(p_row -> 'expected') <> 'null' THEN '{}'::jsonb END)
END;
