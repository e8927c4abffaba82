-- erase_content: one erasure, recorded first in convo.erasures, then
-- written: every row of the conversation that holds content becomes its
-- redact_row, or, with no conversation, every receipt of the owner. It is
-- the one piece of pgconvo that updates content: the tables refuse every
-- UPDATE of content from outside pgconvo's code. Rows already redacted are left alone, so a repeat changes
-- nothing and returns no rows, but is recorded. One row per place (table)
-- where rows changed, also recorded in convo.erasure_places.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_place   record;
    v_n       bigint;
BEGIN
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    -- Each place: its table, the columns redact_row changes, and the key
    -- that selects the conversation's (or the owner's) rows.
    FOR v_place IN
        SELECT * FROM (VALUES
            ('messages', 'parts', 'conversation_id'),
            ('conversations', 'metadata, title', 'id'),
            ('conversation_changes', 'old_value, new_value', 'conversation_id'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id'),
            ('tool_effects', 'arguments', 'conversation_id'),
            ('tool_effect_events', 'evidence', 'conversation_id'),
            ('import_origins', 'node', 'conversation_id'),
            ('imports', 'source_key, digest', 'conversation_id'),
            ('tool_receipts', 'request, request_digest, arguments, expected', 'owner_id')) AS p (tab, cols, key)
         WHERE (p.tab = 'tool_receipts') = (p_conversation_id IS NULL)
    LOOP
        EXECUTE format('UPDATE convo.%1$I t SET (%2$s) = (SELECT %2$s FROM jsonb_populate_record(NULL::convo.%1$I,
                            convo_private.redact_row(%1$L, to_jsonb(t))))
                         WHERE t.%3$I = $1::%4$s AND to_jsonb(t)::text <> convo_private.redact_row(%1$L, to_jsonb(t))::text',
                       v_place.tab, v_place.cols, v_place.key,
                       CASE WHEN p_conversation_id IS NULL THEN 'text' ELSE 'uuid' END)
        USING CASE WHEN p_conversation_id IS NULL THEN p_owner_id ELSE p_conversation_id::text END;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
            VALUES (p_owner_id, v_erasure, v_place.tab, v_n);
            place := v_place.tab;
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
    -- A new version of the conversation's row when anything was erased,
    -- whatever the row itself held: a transaction whose snapshot is older
    -- than the erasure (REPEATABLE READ) then cannot lock the conversation
    -- to write to it (40001), where it would count its key epoch without the
    -- erasure and meet the erased keys (record_tool_call). A repeat that
    -- erased nothing leaves the row as it was.
    IF p_conversation_id IS NOT NULL AND EXISTS (SELECT 1 FROM convo.erasure_places x
                                                  WHERE x.owner_id = p_owner_id AND x.erasure_id = v_erasure) THEN
        UPDATE convo.conversations c SET last_activity_at = c.last_activity_at WHERE c.id = p_conversation_id;
    END IF;
END;
$$;
