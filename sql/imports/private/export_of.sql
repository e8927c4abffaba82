-- export_of: the export document of one conversation (format pgconvo.export,
-- version 3; every key is described in docs/erasure.md and on
-- convo.export_conversation), without an owner check: export_conversation
-- checks the reader, import_conversation compares an import with what it
-- stored. Every row is the table's own row as jsonb, without the
-- conversation id it repeats, in a fixed order, and times print in UTC, so
-- the same rows give the same text in any session and any database.
-- PL/pgSQL, as every function over the tables (a distributed engine runs
-- its statements where the rows are). The
-- tools are the versions the ledger's calls and effects were checked
-- against; the imports are the conversation's record of imports.
CREATE OR REPLACE FUNCTION convo_private.export_of(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
DECLARE
    v_doc   jsonb;
    v_part  jsonb;
    v_tools text[];
BEGIN
    -- One statement a part, each over one table filtered by the
    -- conversation: on a distributed database Citus routes each to the node
    -- that holds the conversation, where it plans no statement that mixes
    -- the allowlist (on every node) or several tables' subqueries.
    SELECT jsonb_build_object('format', 'pgconvo.export', 'version', 3, 'conversation', to_jsonb(c))
      INTO v_doc FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF v_doc IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(jsonb_agg(to_jsonb(m) - 'conversation_id' ORDER BY m.depth, m.parent_id, m.sibling_index), '[]')
      INTO v_part FROM convo.messages m WHERE m.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('messages', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(l) - 'conversation_id' ORDER BY l.seq), '[]')
      INTO v_part FROM convo.conversation_head_log l WHERE l.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('head_log', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(x) - 'conversation_id' ORDER BY x.seq), '[]')
      INTO v_part FROM convo.conversation_changes x WHERE x.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('changes', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(g) - 'conversation_id' ORDER BY g.started_at, g.id), '[]')
      INTO v_part FROM convo.generations g WHERE g.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('generations', v_part);
    -- The tool versions named, as name/version (a name holds no /).
    v_tools := ARRAY(SELECT e.tool_name || '/' || e.tool_version FROM convo.tool_effects e
                      WHERE e.conversation_id = p_conversation_id);
    v_tools := v_tools || ARRAY(SELECT k.tool_name || '/' || k.tool_version FROM convo.tool_effect_calls k
                                 WHERE k.conversation_id = p_conversation_id);
    SELECT coalesce(jsonb_agg(to_jsonb(t) - 'registered_at' - 'registered_by' ORDER BY t.name, t.version), '[]')
      INTO v_part FROM convo.tools t WHERE t.name || '/' || t.version = ANY (v_tools);
    v_doc := v_doc || jsonb_build_object('tools', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(k) - 'conversation_id' ORDER BY k.decided_at, k.tool_call_id), '[]')
      INTO v_part FROM convo.tool_effect_calls k WHERE k.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('tool_calls', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(e) - 'conversation_id' ORDER BY e.requested_at, e.id), '[]')
      INTO v_part FROM convo.tool_effects e WHERE e.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('effects', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(v) - 'conversation_id' ORDER BY v.seq), '[]')
      INTO v_part FROM convo.tool_effect_events v WHERE v.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('effect_events', v_part);
    -- Each erasure with its places, by erasure.
    SELECT coalesce(jsonb_agg(to_jsonb(r) - 'conversation_id' - 'places' || jsonb_build_object('places', r.places)
                              ORDER BY r.erased_at, r.id), '[]')
      INTO v_part
      FROM (SELECT e.*, coalesce((SELECT jsonb_agg(jsonb_build_object('place', x.place, 'rows_redacted', x.rows_redacted)
                                                   ORDER BY x.place)
                                    FROM convo.erasure_places x
                                   WHERE x.conversation_id = p_conversation_id AND x.erasure_id = e.id), '[]') AS places
              FROM convo.erasures e WHERE e.conversation_id = p_conversation_id) r;
    v_doc := v_doc || jsonb_build_object('erasures', v_part);
    -- Import origins: the source node of each message that came from
    -- another product (import_chatgpt, import_openwebui, import_librechat),
    -- by message.
    SELECT coalesce(jsonb_agg(to_jsonb(o) - 'conversation_id' ORDER BY o.message_id), '[]')
      INTO v_part FROM convo.import_origins o WHERE o.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('origins', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(i) - 'conversation_id' ORDER BY i.imported_at, i.id), '[]')
      INTO v_part FROM convo.imports i WHERE i.conversation_id = p_conversation_id;
    RETURN v_doc || jsonb_build_object('imports', v_part);
END;
$$;
