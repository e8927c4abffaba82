-- erase_content: one erasure, recorded first in convo.erasures (which is
-- what lets the redaction past the append-only and state-machine triggers:
-- is_erasure), then written: every row of the conversation that holds
-- content becomes its redact_row, or, with no conversation, every receipt of
-- the owner. Rows already redacted are left alone, so a repeat changes
-- nothing and returns no rows, but is recorded. One row per place (table)
-- where rows changed, also recorded in convo.erasure_places.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_counts  jsonb := '{}';
    v_n       bigint;
BEGIN
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    IF p_conversation_id IS NULL THEN
        UPDATE convo.tool_receipts t SET (request, arguments, expected) =
               (SELECT r.request, r.arguments, r.expected
                  FROM jsonb_populate_record(NULL::convo.tool_receipts, convo_private.redact_row('tool_receipts', to_jsonb(t))) r)
         WHERE t.owner_id = p_owner_id
           AND to_jsonb(t)::text <> convo_private.redact_row('tool_receipts', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('tool_receipts', v_n);
    ELSE
        UPDATE convo.messages t SET parts = convo_private.redact_row('messages', to_jsonb(t)) -> 'parts'
         WHERE t.conversation_id = p_conversation_id
           AND to_jsonb(t)::text <> convo_private.redact_row('messages', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('messages', v_n);

        UPDATE convo.message_parts t SET body = convo_private.redact_row('message_parts', to_jsonb(t)) -> 'body'
         WHERE t.conversation_id = p_conversation_id
           AND to_jsonb(t)::text <> convo_private.redact_row('message_parts', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('message_parts', v_n);

        UPDATE convo.conversations t SET metadata = '{}'
         WHERE t.id = p_conversation_id AND t.metadata::text <> '{}';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('conversations', v_n);

        UPDATE convo.generations t SET (params, request_digest, usage, error) =
               (SELECT r.params, r.request_digest, r.usage, r.error
                  FROM jsonb_populate_record(NULL::convo.generations, convo_private.redact_row('generations', to_jsonb(t))) r)
         WHERE t.conversation_id = p_conversation_id
           AND to_jsonb(t)::text <> convo_private.redact_row('generations', to_jsonb(t))::text;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('generations', v_n);

        UPDATE convo.tool_effects t SET arguments = '{}'
         WHERE t.conversation_id = p_conversation_id AND t.arguments::text <> '{}';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('tool_effects', v_n);

        UPDATE convo.tool_effect_events t SET evidence = '{}'
         WHERE t.conversation_id = p_conversation_id AND t.evidence::text <> '{}';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_counts := v_counts || jsonb_build_object('tool_effect_events', v_n);
    END IF;

    INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
    SELECT p_owner_id, v_erasure, c.key, c.value::bigint
      FROM jsonb_each_text(v_counts) c
     WHERE c.value::bigint > 0;
    RETURN QUERY SELECT c.key, c.value::bigint FROM jsonb_each_text(v_counts) c WHERE c.value::bigint > 0 ORDER BY c.key;
END;
$$;
