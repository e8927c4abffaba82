-- erase_content: one erasure: every row of the conversation that holds
-- content becomes its redact_row, recorded first in convo.erasures, with
-- one row per place (table) where rows changed in convo.erasure_places; or,
-- with no conversation, every receipt of the owner, recorded in
-- convo.owner_erasures. Each record lives beside what it erased (on a
-- distributed database, on the node of the conversation, or of the owner).
-- It is the one piece of pgconvo that updates content: the tables refuse
-- every UPDATE of content from outside pgconvo's code. Rows already
-- redacted are left alone, so a repeat changes nothing and returns no rows,
-- but is recorded. The first erasure of a conversation marks it erased
-- (erased_at), so that the sidebar no longer lists it.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_place   record;
    v_n       bigint;
    v_rows    jsonb[];
    v_at      timestamptz;
BEGIN
    IF p_conversation_id IS NULL THEN
        SELECT array_agg(convo_private.redact_row('tool_receipts', to_jsonb(t))) INTO v_rows
          FROM convo.tool_receipts t
         WHERE t.owner_id = p_owner_id
           AND to_jsonb(t)::text <> convo_private.redact_row('tool_receipts', to_jsonb(t))::text;
        UPDATE convo.tool_receipts t
           SET (request, request_digest, arguments, expected)
             = (SELECT x.request, x.request_digest, x.arguments, x.expected
                  FROM jsonb_populate_record(NULL::convo.tool_receipts, r.j) x)
          FROM unnest(v_rows) AS r (j)
         WHERE t.owner_id = p_owner_id AND t.id = (r.j ->> 'id')::uuid;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        INSERT INTO convo.owner_erasures (owner_id, id, reason, receipts_redacted)
        VALUES (p_owner_id, v_erasure, p_reason, v_n);
        IF v_n > 0 THEN
            place := 'tool_receipts';
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
        RETURN;
    END IF;
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason)
    RETURNING erased_at INTO v_at;

    -- Each place: its table, the columns redact_row changes, the column
    -- that selects the conversation's rows and the one that tells them
    -- apart. The redacted rows are read first and written by key: an
    -- UPDATE computes nothing from the rows it changes (Citus refuses a
    -- STABLE function over them, as to_jsonb is).
    FOR v_place IN
        SELECT * FROM (VALUES
            ('messages', 'parts', 'conversation_id', 'id', 'uuid'),
            ('conversations', 'metadata, title', 'id', 'id', 'uuid'),
            ('conversation_changes', 'old_value, new_value', 'conversation_id', 'seq', 'bigint'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id', 'id', 'uuid'),
            ('tool_effects', 'arguments', 'conversation_id', 'id', 'uuid'),
            ('tool_effect_events', 'evidence', 'conversation_id', 'seq', 'bigint'),
            ('import_origins', 'node', 'conversation_id', 'message_id', 'uuid'),
            ('imports', 'source_key, digest', 'conversation_id', 'id', 'uuid')) AS p (tab, cols, key, pk, pk_type)
    LOOP
        EXECUTE format('SELECT array_agg(convo_private.redact_row(%1$L, to_jsonb(t))) FROM convo.%1$I t
                         WHERE t.%2$I = $1 AND to_jsonb(t)::text <> convo_private.redact_row(%1$L, to_jsonb(t))::text',
                       v_place.tab, v_place.key)
           INTO v_rows USING p_conversation_id;
        EXECUTE format('UPDATE convo.%1$I t SET (%2$s) = (SELECT %2$s FROM jsonb_populate_record(NULL::convo.%1$I, r.j))
                          FROM unnest($2) AS r (j)
                         WHERE t.%3$I = $1 AND t.%4$I = (r.j ->> %4$L)::%5$s',
                       v_place.tab, v_place.cols, v_place.key, v_place.pk, v_place.pk_type)
        USING p_conversation_id, v_rows;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted, conversation_id)
            VALUES (p_owner_id, v_erasure, v_place.tab, v_n, p_conversation_id);
            place := v_place.tab;
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
    -- The search index's entries of the conversation, derived from its
    -- messages' text, go (search_conversations finds nothing of it again).
    DELETE FROM convo_private.message_search s WHERE s.conversation_id = p_conversation_id;
    -- The conversation is erased from its first erasure on, at that
    -- erasure's time: conversations() no longer lists it.
    UPDATE convo.conversations c SET erased_at = v_at WHERE c.id = p_conversation_id AND c.erased_at IS NULL;
    -- A new version of the conversation's row when anything was erased,
    -- whatever the row itself held: a transaction whose snapshot is older
    -- than the erasure (REPEATABLE READ) then cannot lock the conversation
    -- to write to it (40001), where it would count its key epoch without the
    -- erasure and meet the erased keys (record_tool_call). A repeat that
    -- erased nothing leaves the row as it was.
    IF NOT FOUND AND EXISTS (SELECT 1 FROM convo.erasure_places x
                              WHERE x.conversation_id = p_conversation_id AND x.erasure_id = v_erasure) THEN
        UPDATE convo.conversations c SET last_activity_at = c.last_activity_at WHERE c.id = p_conversation_id;
    END IF;
END;
$$;
