-- 0022_import_record down: reverses 0022_import_record.up.sql.

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

-- export_conversation: everything pgconvo holds about one conversation, as
-- one JSON document that import_conversation reads back identically (the
-- answer to a data-subject access request, too). A read: the caller must see
-- the conversation's owner (CV002 otherwise, as path does).
CREATE OR REPLACE FUNCTION convo.export_conversation(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    RETURN convo_private.export_of(p_conversation_id);
END;
$$;

COMMENT ON FUNCTION convo.export_conversation(uuid) IS
    'Everything stored about one conversation as JSON: {"format": "pgconvo.export", "version": 1, "conversation": its row, "messages": the tree with parts, "head_log", "generations", "tools": the tool versions its effects were checked against, "tool_calls": ledger decisions, "effects", "effect_events", "erasures" (with places), "origins": the source node of each imported message}; each row as its table''s columns, times in UTC. See the README.';

-- import_chatgpt: one conversation of a ChatGPT export (an element of
-- conversations.json, or a bare conversation object) as a new conversation
-- of p_owner_id, by the rules of import-mapping.md §4: the whole tree with
-- its original times, current_node as the head (head-log reason 'import'),
-- each source node kept verbatim in import_origins, tool calls as tool_use
-- and tool_result parts where they pair, no ledger rows. The id is derived
-- from the owner and the source id, so a repeat of the same import returns
-- it and writes nothing; the same source with other content is CV009.
-- Malformed input is CV011 naming the node, and nothing is written.
CREATE OR REPLACE FUNCTION convo.import_chatgpt(p_owner_id text, p_conversation jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_mapping jsonb := p_conversation -> 'mapping';
    v_current jsonb := p_conversation -> 'current_node';
    v_source  text;
    v_id      uuid;
    v_digest  text;
    v_where   text;
    v_bad     record;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);
    IF p_conversation IS NULL OR jsonb_typeof(p_conversation) <> 'object' THEN
        RAISE EXCEPTION 'p_conversation must be one ChatGPT conversation, a JSON object, not %',
                coalesce(jsonb_typeof(p_conversation), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each element of conversations.json on its own.';
    END IF;
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('chatgpt', 'ChatGPT conversation', p_owner_id,
                                    coalesce(convo_private.nonempty_text(p_conversation -> 'conversation_id'),
                                             convo_private.nonempty_text(p_conversation -> 'id')), p_conversation) k;
    IF convo_private.import_repeat(v_id, p_owner_id, v_digest, v_where) THEN
        RETURN v_id;
    END IF;

    IF jsonb_typeof(v_mapping) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a ChatGPT conversation needs a "mapping" object, not %', coalesce(jsonb_typeof(v_mapping), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    -- The refusals of §4.1, first node by key (bytewise) first.
    SELECT e.key, e.why INTO v_bad
      FROM (SELECT n.key, CASE
                   WHEN jsonb_typeof(n.node) <> 'object' THEN 'is not an object'
                   WHEN jsonb_typeof(n.node -> 'id') NOT IN ('null') AND n.node -> 'id' <> to_jsonb(n.key)
                       THEN 'has an id other than its key'
                   WHEN jsonb_typeof(n.node -> 'parent') NOT IN ('string', 'null')
                       THEN 'has a parent that is neither a string nor null'
                   WHEN jsonb_typeof(n.node -> 'parent') = 'string' AND NOT v_mapping ? (n.node ->> 'parent')
                       THEN 'names a parent that is not in the mapping (missing parent)'
                   WHEN jsonb_typeof(n.node -> 'children') NOT IN ('array', 'null')
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.node -> 'children') = 'array'
                                                                           THEN n.node -> 'children' END) c (child)
                                    WHERE jsonb_typeof(c.child) <> 'string')
                       THEN 'has children that are not an array of strings'
                   WHEN jsonb_typeof(n.node -> 'message') NOT IN ('object', 'null')
                       THEN 'has a message that is neither an object nor null'
                   WHEN jsonb_typeof(n.node -> 'message') IS DISTINCT FROM 'object' THEN NULL
                   WHEN (n.node -> 'message' -> 'author' ->> 'role') IS NULL
                        OR jsonb_typeof(n.node -> 'message' -> 'author' -> 'role') <> 'string'
                        OR n.node -> 'message' -> 'author' ->> 'role' NOT IN ('system', 'user', 'assistant', 'tool')
                       THEN 'has a missing or unknown author.role'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'author' -> 'name') NOT IN ('string', 'null')
                       THEN 'has an author.name that is neither a string nor null'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'content' -> 'content_type') IS DISTINCT FROM 'string'
                       THEN 'has no content, or a content_type that is not a string'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'create_time') NOT IN ('number', 'null')
                       THEN 'has a create_time that is neither a number nor null'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'create_time') = 'number'
                        AND convo_private.epoch_time(n.node -> 'message' -> 'create_time', NULL) IS NULL
                       THEN 'has a create_time outside years 1 to 9999'
                   END AS why
              FROM jsonb_each(v_mapping) AS n (key, node)) e
     WHERE e.why IS NOT NULL
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ChatGPT node % %', v_bad.key, v_bad.why
            USING ERRCODE = 'CV011', DETAIL = format('%s, node %s', v_where, v_bad.key);
    END IF;
    IF jsonb_typeof(v_current) IS DISTINCT FROM 'null' AND v_current IS NOT NULL
       AND (jsonb_typeof(v_current) <> 'string' OR NOT v_mapping ? (v_current #>> '{}')) THEN
        RAISE EXCEPTION 'current_node names no node of the mapping'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, current_node %s', v_where, left(v_current::text, convo_private.max_id_length()));
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'chatgpt', v_mapping,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        convo_private.epoch_time(p_conversation -> 'create_time', NULL),
        jsonb_build_object('format', 'chatgpt', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'mapping', 'requested_head', coalesce(v_current, 'null'),
                           'digest', v_digest),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_chatgpt(text, jsonb) IS
    'Import one ChatGPT conversation (the whole tree, original times, current_node as the head); a repeat returns the same id.';

-- import_conversation: reads an export (export_conversation's document) back
-- into this database with the same ids, times, reasons, states and sequence
-- numbers, for p_owner_id, which must be the export's owner and one the
-- session may write for (CV011, as create_conversation). The rows go in
-- through the tables' own triggers, in an order they accept: messages parent
-- first and siblings in order (the tree trigger recomputes depth, sibling
-- position and branch, and the part triggers check every part), generations
-- begin streaming and end, effects walk their event chain one transition at
-- a time through the state machine. Only what those triggers stamp with the
-- present (a message's time, the head log, the event log) or decide anew
-- (ledger decisions) is kept as exported instead, and only while this
-- function's marker row names the conversation (is_import). The result must
-- export back to exactly the input (CV011 otherwise), so nothing is dropped
-- or changed on the way. A repeat is a no-op returning the id; the same id
-- with other content is CV009. Malformed input is CV011 with a DETAIL naming
-- the key or ids, and writes nothing.
CREATE OR REPLACE FUNCTION convo.import_conversation(p_owner_id text, p_export jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
DECLARE
    v_keys      constant text[] := ARRAY['format', 'version', 'conversation', 'messages', 'head_log', 'generations',
                                         'tools', 'tool_calls', 'effects', 'effect_events', 'erasures', 'origins'];
    v_key       text;
    v_conv      jsonb;
    v_id        uuid;
    v_existing  convo.conversations;
    v_problem   text;
    v_steps     int;
    v_state     text;
    v_table     text;
    v_constraint text;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);

    -- The envelope: format, version, exactly the keys of version 1.
    IF p_export IS NULL OR jsonb_typeof(p_export) <> 'object' THEN
        RAISE EXCEPTION 'p_export must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, p_export %s', p_owner_id, coalesce(jsonb_typeof(p_export), 'NULL'));
    END IF;
    IF p_export -> 'format' IS DISTINCT FROM '"pgconvo.export"' OR p_export -> 'version' IS DISTINCT FROM '1' THEN
        RAISE EXCEPTION 'not a pgconvo export of version 1'
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, format %s, version %s', p_owner_id,
                                  coalesce((p_export -> 'format')::text, 'missing'), coalesce((p_export -> 'version')::text, 'missing')),
                  HINT = 'import_conversation reads what export_conversation writes: {"format": "pgconvo.export", "version": 1, ...}.';
    END IF;
    FOREACH v_key IN ARRAY v_keys LOOP
        IF NOT p_export ? v_key THEN
            RAISE EXCEPTION 'the export has no key "%"', v_key
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, missing key %s', p_owner_id, v_key);
        END IF;
        IF jsonb_typeof(p_export -> v_key) <> (CASE v_key WHEN 'format' THEN 'string' WHEN 'version' THEN 'number'
                                                        WHEN 'conversation' THEN 'object' ELSE 'array' END) THEN
            RAISE EXCEPTION 'the export''s "%" is a JSON %', v_key, jsonb_typeof(p_export -> v_key)
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, key %s', p_owner_id, v_key);
        END IF;
    END LOOP;
    SELECT k INTO v_key FROM jsonb_object_keys(p_export) k WHERE k <> ALL (v_keys) ORDER BY k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the export has an unknown key "%"', v_key
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, unknown key %s', p_owner_id, v_key);
    END IF;
    v_conv := p_export -> 'conversation';
    IF jsonb_typeof(v_conv -> 'id') IS DISTINCT FROM 'string'
       OR v_conv ->> 'id' !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'the export''s conversation has no uuid "id"'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, key conversation.id', p_owner_id);
    END IF;
    v_id := (v_conv ->> 'id')::uuid;
    IF v_conv -> 'owner_id' IS DISTINCT FROM to_jsonb(p_owner_id) THEN
        RAISE EXCEPTION 'the export belongs to another owner'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, owner %s', v_id, p_owner_id);
    END IF;

    BEGIN
        -- A repeat: recognised by the id before any other check. The same
        -- export (as text) returns the id and writes nothing; anything else
        -- under that id, another owner's conversation included, is CV009.
        INSERT INTO convo.conversations (id, owner_id, metadata, created_at)
        VALUES (v_id, p_owner_id, v_conv -> 'metadata', (v_conv ->> 'created_at')::timestamptz)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
            IF v_existing.owner_id IS DISTINCT FROM p_owner_id
               OR convo_private.export_of(v_id)::text IS DISTINCT FROM p_export::text THEN
                RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                    USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
            END IF;
            RETURN v_id;
        END IF;
        IF octet_length((v_conv -> 'metadata')::text) > convo.max_metadata_bytes() THEN
            RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('conversation %s: %s bytes', v_id, octet_length((v_conv -> 'metadata')::text));
        END IF;

        -- References: every id the export names is in the export, and the
        -- chains hold, or CV011 naming the first that is not (one pass each).
        WITH m AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages')),
             l AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.conversation_head_log, p_export -> 'head_log')),
             g AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.generations, p_export -> 'generations')),
             k AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effect_calls, p_export -> 'tool_calls')),
             e AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effects, p_export -> 'effects')),
             v AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events')),
             t AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tools, p_export -> 'tools')),
             o AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins'))
        SELECT p INTO v_problem FROM (
            (SELECT format('message %s appears twice', m.id) FROM m GROUP BY m.id HAVING count(*) > 1 LIMIT 1)
            UNION ALL
            (SELECT format('message %s has parent %s, which is not in the export', c.id, c.parent_id)
               FROM m c LEFT JOIN m p ON p.id = c.parent_id
              WHERE c.parent_id IS NOT NULL AND p.id IS NULL LIMIT 1)
            UNION ALL
            (SELECT format('message %s has depth %s under parent %s of depth %s', c.id, c.depth, c.parent_id, p.depth)
               FROM m c LEFT JOIN m p ON p.id = c.parent_id
              WHERE c.depth IS DISTINCT FROM CASE WHEN c.parent_id IS NULL THEN 0 ELSE p.depth + 1 END LIMIT 1)
            UNION ALL
            (SELECT format('head %s is not in the tree', v_conv ->> 'head_message_id')
              WHERE v_conv ->> 'head_message_id' IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM m WHERE m.id::text = v_conv ->> 'head_message_id'))
            UNION ALL
            (SELECT format('head-log row %s names message %s, which is not in the export', l.seq, coalesce(l.head_message_id, l.previous_head_id))
               FROM l WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = l.head_message_id)
                         OR (l.previous_head_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = l.previous_head_id)) LIMIT 1)
            UNION ALL
            (SELECT format('head-log row %s starts at %s, not where the row before ended (%s)', x.seq, coalesce(x.previous_head_id::text, 'none'),
                           coalesce(x.before::text, 'none'))
               FROM (SELECT l.seq, l.previous_head_id, lag(l.head_message_id) OVER (ORDER BY l.seq) AS before FROM l) x
              WHERE x.previous_head_id IS DISTINCT FROM x.before LIMIT 1)
            UNION ALL
            (SELECT format('the head log ends at %s, the head is %s', coalesce(x.head_message_id::text, 'none'),
                           coalesce(v_conv ->> 'head_message_id', 'none'))
               FROM (SELECT (SELECT l.head_message_id FROM l ORDER BY l.seq DESC LIMIT 1) AS head_message_id) x
              WHERE x.head_message_id::text IS DISTINCT FROM v_conv ->> 'head_message_id')
            UNION ALL
            (SELECT format('generation %s names message %s, which is not in the export', g.id,
                           coalesce(g.prompt_message_id, g.head_at_begin, g.message_id))
               FROM g WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.prompt_message_id)
                         OR (g.head_at_begin IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.head_at_begin))
                         OR (g.message_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.message_id)) LIMIT 1)
            UNION ALL
            (SELECT format('tool call %s names message %s, which is not in the export', k.tool_call_id, coalesce(k.message_id, k.fork_point_id))
               FROM k WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = k.message_id)
                         OR (k.fork_point_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = k.fork_point_id)) LIMIT 1)
            UNION ALL
            (SELECT format('tool call %s names effect %s, which is not in the export', k.tool_call_id, k.effect_id)
               FROM k WHERE k.effect_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM e WHERE e.id = k.effect_id) LIMIT 1)
            UNION ALL
            (SELECT format('effect %s repeats effect %s, which is not in the export', e.id, e.repeats_effect_id)
               FROM e WHERE e.repeats_effect_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM e r WHERE r.id = e.repeats_effect_id) LIMIT 1)
            UNION ALL
            (SELECT format('effect %s names tool %s version %s, which is not in the export', e.id, e.tool_name, e.tool_version)
               FROM e WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.name = e.tool_name AND t.version = e.tool_version) LIMIT 1)
            UNION ALL
            (SELECT format('erasure %s names owner %s', r.id, r.owner_id)
               FROM jsonb_populate_recordset(NULL::convo.erasures, p_export -> 'erasures') r
              WHERE r.owner_id IS DISTINCT FROM p_owner_id LIMIT 1)
            UNION ALL
            (SELECT format('origin of message %s: the message is not in the export', o.message_id)
               FROM o WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = o.message_id) LIMIT 1)
            UNION ALL
            (SELECT format('message %s has two origins', o.message_id) FROM o GROUP BY o.message_id HAVING count(*) > 1 LIMIT 1)
            UNION ALL
            (SELECT format('event %s names effect %s, which is not in the export', v.seq, v.effect_id)
               FROM v WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.id = v.effect_id) LIMIT 1)
            UNION ALL
            (SELECT format('event %s of effect %s goes from %s, not from %s', x.seq, x.effect_id, x.from_state, x.before)
               FROM (SELECT v.seq, v.effect_id, v.from_state,
                            coalesce(lag(v.to_state) OVER (PARTITION BY v.effect_id ORDER BY v.seq), 'requested') AS before FROM v) x
              WHERE x.from_state IS DISTINCT FROM x.before LIMIT 1)
            UNION ALL
            (SELECT format('effect %s is %s, its last event says %s', e.id, e.state, coalesce(x.to_state, 'nothing'))
               FROM e LEFT JOIN (SELECT DISTINCT ON (v.effect_id) v.effect_id, v.to_state FROM v ORDER BY v.effect_id, v.seq DESC) x
                 ON x.effect_id = e.id
              WHERE x.to_state IS DISTINCT FROM e.state LIMIT 1)
        ) AS problems (p)
        LIMIT 1;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export is not consistent: %', v_problem
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, %s', v_id, v_problem);
        END IF;
        -- The tool versions its effects were checked against are this
        -- database's too: an import never adds to the allowlist (the DBA's).
        SELECT format('tool %s version %s', x.name, x.version) INTO v_problem
          FROM jsonb_array_elements(p_export -> 'tools') AS j (tool)
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tools, j.tool) AS x
          LEFT JOIN convo.tools t ON t.name = x.name AND t.version = x.version
         WHERE t.name IS NULL OR (to_jsonb(t) - 'registered_at' - 'registered_by')::text IS DISTINCT FROM j.tool::text
         LIMIT 1;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export''s % is not registered here with the same settings', v_problem
                USING ERRCODE = 'CV007', DETAIL = format('conversation %s, %s', v_id, v_problem),
                      HINT = 'Register the tool versions the export lists (convo.register_tool) before importing.';
        END IF;

        -- From here the triggers keep the exported stamps (is_import).
        INSERT INTO convo_private.importing (conversation_id) VALUES (v_id);
        PERFORM set_config('convo.importing', v_id::text, true);

        -- Origins first, as the imports write them (the foreign key to the
        -- message is deferred).
        INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
        SELECT v_id, o.message_id, o.source, o.node_key, o.node
          FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins') o;

        INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts, created_at)
        SELECT v_id, m.id, m.parent_id, m.role, m.branch_reason, m.parts, m.created_at
          FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m
         ORDER BY m.depth, m.sibling_index;

        INSERT INTO convo.conversation_head_log OVERRIDING SYSTEM VALUE
        SELECT r.* FROM jsonb_array_elements(p_export -> 'head_log') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.conversation_head_log,
                                             j.elem || jsonb_build_object('conversation_id', v_id)) r;
        UPDATE convo.conversations c SET head_message_id = (v_conv ->> 'head_message_id')::uuid
         WHERE c.id = v_id AND v_conv ->> 'head_message_id' IS NOT NULL;

        -- Generations begin streaming, then end as they did.
        INSERT INTO convo.generations (conversation_id, id, prompt_message_id, head_at_begin, model, params,
                                       request_digest, state, started_at)
        SELECT v_id, g.id, g.prompt_message_id, g.head_at_begin, g.model, g.params, g.request_digest, 'streaming', g.started_at
          FROM jsonb_populate_recordset(NULL::convo.generations, p_export -> 'generations') g;
        UPDATE convo.generations x
           SET state = g.state, message_id = g.message_id, usage = g.usage, finish_reason = g.finish_reason,
               error_code = g.error_code, error = g.error, finished_at = g.finished_at
          FROM jsonb_populate_recordset(NULL::convo.generations, p_export -> 'generations') g
         WHERE x.conversation_id = v_id AND x.id = g.id AND g.state IS DISTINCT FROM 'streaming';

        -- Effects enter at their first event's state, each column a later
        -- transition sets still unset (a confirmed re-run under its scope
        -- key), then take each later event as an UPDATE that the state
        -- machine checks (tool_effects_transition), in the order of
        -- requested_at, so that a re-run follows the effect it repeats.
        INSERT INTO convo.tool_effects
        SELECT r.*
          FROM jsonb_array_elements(p_export -> 'effects') j (elem)
          LEFT JOIN (SELECT v.effect_id,
                            (array_agg(v.to_state ORDER BY v.seq))[1] AS first_state,
                            array_agg(c.col) FILTER (WHERE c.col IS NOT NULL) AS later
                       FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v
                       LEFT JOIN convo.effect_transitions tr ON tr.from_state = v.from_state AND tr.to_state = v.to_state
                                                             AND v.from_state <> 'requested'
                       LEFT JOIN LATERAL unnest(tr.changes) c (col) ON true
                      GROUP BY v.effect_id) s ON s.effect_id::text = j.elem ->> 'id'
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tool_effects,
              j.elem || jsonb_build_object('conversation_id', v_id, 'state', s.first_state)
                    || coalesce((SELECT jsonb_object_agg(u.col, CASE WHEN u.col = 'idempotency_key' THEN j.elem -> 'scope_key'
                                                                     WHEN u.col = 'deadline_at' THEN j.elem -> 'deadline_at'
                                                                     ELSE 'null' END)
                                   FROM unnest(s.later) u (col)), '{}')) r
         ORDER BY r.requested_at, r.id;
        SELECT max(n) INTO v_steps
          FROM (SELECT count(*) AS n FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v
                 GROUP BY v.effect_id) x;
        FOR v_step IN 2 .. coalesce(v_steps, 1) LOOP
            UPDATE convo.tool_effects x
               SET state = s.to_state,
                   idempotency_key = CASE WHEN 'idempotency_key' = ANY (s.changes) THEN f.idempotency_key ELSE x.idempotency_key END,
                   deadline_at = CASE WHEN 'deadline_at' = ANY (s.changes) THEN f.deadline_at ELSE x.deadline_at END,
                   confirmed_by = CASE WHEN 'confirmed_by' = ANY (s.changes) THEN f.confirmed_by ELSE x.confirmed_by END,
                   confirmed_at = CASE WHEN 'confirmed_at' = ANY (s.changes) THEN f.confirmed_at ELSE x.confirmed_at END,
                   settled_at = CASE WHEN 'settled_at' = ANY (s.changes) THEN f.settled_at ELSE x.settled_at END,
                   external_ref = CASE WHEN 'external_ref' = ANY (s.changes) THEN f.external_ref ELSE x.external_ref END,
                   http_status = CASE WHEN 'http_status' = ANY (s.changes) THEN f.http_status ELSE x.http_status END,
                   error_code = CASE WHEN 'error_code' = ANY (s.changes) THEN f.error_code ELSE x.error_code END,
                   compensated_by = CASE WHEN 'compensated_by' = ANY (s.changes) THEN f.compensated_by ELSE x.compensated_by END,
                   compensated_at = CASE WHEN 'compensated_at' = ANY (s.changes) THEN f.compensated_at ELSE x.compensated_at END
              FROM (SELECT v.effect_id, v.to_state, tr.changes
                      FROM (SELECT v.*, row_number() OVER (PARTITION BY v.effect_id ORDER BY v.seq) AS n
                              FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v) v
                      JOIN convo.effect_transitions tr ON tr.from_state = v.from_state AND tr.to_state = v.to_state
                     WHERE v.n = v_step) s,
                   jsonb_populate_recordset(NULL::convo.tool_effects, p_export -> 'effects') f
             WHERE x.conversation_id = v_id AND x.id = s.effect_id AND f.id = s.effect_id;
        END LOOP;

        INSERT INTO convo.tool_effect_calls
        SELECT r.* FROM jsonb_array_elements(p_export -> 'tool_calls') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.tool_effect_calls,
                                             j.elem || jsonb_build_object('conversation_id', v_id)) r;
        INSERT INTO convo.tool_effect_events OVERRIDING SYSTEM VALUE
        SELECT r.* FROM jsonb_array_elements(p_export -> 'effect_events') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.tool_effect_events,
                                             j.elem || jsonb_build_object('conversation_id', v_id)) r;

        -- The record of earlier erasures, recorded by this transaction.
        INSERT INTO convo.erasures (owner_id, id, conversation_id, reason, erased_by, erased_at)
        SELECT r.owner_id, r.id, v_id, r.reason, r.erased_by, r.erased_at
          FROM jsonb_populate_recordset(NULL::convo.erasures, p_export -> 'erasures') r;
        INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
        SELECT j.elem ->> 'owner_id', (j.elem ->> 'id')::uuid, p.place, p.rows_redacted
          FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
               LATERAL jsonb_to_recordset(j.elem -> 'places') p (place text, rows_redacted bigint);

        DELETE FROM convo_private.importing i WHERE i.conversation_id = v_id AND i.xact = pg_current_xact_id();
        PERFORM set_config('convo.importing', '', true);

        -- What is stored exports back to exactly the input: no key ignored,
        -- no value changed (a derived column, a time, a number's text).
        SELECT k INTO v_key FROM (SELECT convo_private.export_of(v_id) AS stored) s, unnest(v_keys) k
         WHERE (s.stored -> k)::text IS DISTINCT FROM (p_export -> k)::text
         ORDER BY array_position(v_keys, k) LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the export does not read back identically: its "%" differs from what it stores', v_key
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, key %s', v_id, v_key),
                      HINT = 'Import exactly what export_conversation wrote: rows with all their columns, as it spells them.';
        END IF;
    EXCEPTION
        WHEN integrity_constraint_violation OR data_exception THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_table = TABLE_NAME, v_constraint = CONSTRAINT_NAME;
            RAISE EXCEPTION 'the export is not well formed'
                USING ERRCODE = 'CV011',
                      DETAIL = format('conversation %s, SQLSTATE %s, table %s, constraint %s', v_id, v_state,
                                      coalesce(nullif(v_table, ''), 'none'), coalesce(nullif(v_constraint, ''), 'none'));
    END;

    PERFORM convo_private.advance_identity('convo.conversation_head_log', 'seq',
                                           (SELECT max(l.seq) FROM convo.conversation_head_log l WHERE l.conversation_id = v_id));
    PERFORM convo_private.advance_identity('convo.tool_effect_events', 'seq',
                                           (SELECT max(v.seq) FROM convo.tool_effect_events v WHERE v.conversation_id = v_id));
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.import_conversation(text, jsonb) IS
    'Reads an export_conversation document back for its owner, with the same ids, times, reasons, states and sequence numbers; a repeat returns the id, other content under the id is CV009, malformed input CV011.';

-- import_librechat: one conversation of LibreChat's own JSON export (a
-- recursive one, replies nested in children, or a flat list) as a new
-- conversation of p_owner_id, by the rules of import_chatgpt wherever they
-- apply: the whole tree by parentMessageId (the zero UUID or null: a root),
-- messages keyed by messageId, original times (createdAt; without one the
-- parent's, a root the conversation's: its earliest createdAt), user when
-- isCreatedByUser else assistant, the latest leaf as the head (there is no
-- current-leaf field: head_fallback latest_leaf), each message kept in
-- import_origins (a recursive export's without its children, which are
-- messages of their own), the top-level fields in metadata.import. Repeats,
-- CV009, CV011 (naming the message) and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_librechat(p_owner_id text, p_conversation jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_messages  jsonb := p_conversation -> 'messages';
    v_recursive boolean;
    v_source    text;
    v_id        uuid;
    v_digest    text;
    v_where     text;
    v_bad       text[];
    v_nodes     jsonb;
    v_time      timestamptz;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);
    IF p_conversation IS NULL OR jsonb_typeof(p_conversation) <> 'object' THEN
        RAISE EXCEPTION 'p_conversation must be one LibreChat conversation, a JSON object, not %',
                coalesce(jsonb_typeof(p_conversation), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each exported conversation on its own.';
    END IF;
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('librechat', 'LibreChat conversation', p_owner_id,
                                    convo_private.nonempty_text(p_conversation -> 'conversationId'), p_conversation) k;
    IF convo_private.import_repeat(v_id, p_owner_id, v_digest, v_where) THEN
        RETURN v_id;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'a LibreChat conversation needs a "messages" array, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    v_recursive := p_conversation -> 'recursive' = 'true';
    -- One pass over the messages: the first refusal in document order, the
    -- nodes for import_tree (keyed by messageId: the source parent, the
    -- time, the origin and, when read, the nested children's ids), and the
    -- conversation's time. Parents and duplicates are hash joins.
    WITH f AS MATERIALIZED (
        SELECT x.*,
               CASE WHEN jsonb_typeof(x.message) = 'object' THEN convo_private.nonempty_text(x.message -> 'messageId') END AS id,
               CASE WHEN jsonb_typeof(x.message -> 'parentMessageId') = 'string'
                         AND x.message ->> 'parentMessageId' <> '00000000-0000-0000-0000-000000000000'
                    THEN x.message ->> 'parentMessageId' END AS parent,
               convo_private.iso_time(x.message -> 'createdAt') AS at
          FROM convo_private.librechat_flatten(v_messages, v_recursive) x
    ), ids AS MATERIALIZED (
        SELECT f.id, count(*) AS n FROM f WHERE f.id IS NOT NULL GROUP BY f.id
    ), c AS MATERIALIZED (
        SELECT f.*,
               coalesce(left(f.id, convo_private.max_id_length()),
                        CASE WHEN f.depth = 0 THEN format('messages[%s]', f.ord - 1)
                             ELSE format('children[%s] of message %s', f.ord - 1, coalesce(f.nest_parent, 'without a messageId')) END)
                   AS name,
               CASE WHEN jsonb_typeof(f.message) <> 'object' THEN 'is not an object'
                    WHEN f.id IS NULL THEN 'has no messageId (a non-empty string)'
                    WHEN f.id = '00000000-0000-0000-0000-000000000000'
                        THEN 'has the zero UUID, which means "no parent", as its messageId'
                    WHEN d.n > 1 THEN 'has the messageId of another message too (a duplicate)'
                    WHEN jsonb_typeof(f.message -> 'parentMessageId') NOT IN ('string', 'null')
                        THEN 'has a parentMessageId that is neither a string nor null'
                    WHEN f.parent IS NOT NULL AND p.id IS NULL
                        THEN 'names a parentMessageId that is no message (missing parent)'
                    WHEN jsonb_typeof(f.message -> 'isCreatedByUser') NOT IN ('boolean', 'null')
                        THEN 'has an isCreatedByUser that is neither true nor false'
                    WHEN v_recursive AND jsonb_typeof(f.message -> 'children') NOT IN ('array', 'null')
                        THEN 'has children that are not a list'
                    WHEN jsonb_typeof(f.message -> 'createdAt') NOT IN ('string', 'null')
                         OR (jsonb_typeof(f.message -> 'createdAt') = 'string' AND f.at IS NULL)
                        THEN 'has a createdAt that is not an ISO 8601 time'
                    END AS why
          FROM f
          LEFT JOIN ids d ON d.id = f.id
          LEFT JOIN ids p ON p.id = f.parent
    )
    SELECT (SELECT ARRAY[c.name, c.why] FROM c WHERE c.why IS NOT NULL ORDER BY c.seq LIMIT 1),
           (SELECT coalesce(jsonb_object_agg(c.id, jsonb_build_object('parent', c.parent, 'at', c.at, 'node', c.message)
                                                   || CASE WHEN c.listed THEN jsonb_build_object('children', coalesce(l.children, '[]'))
                                                           ELSE '{}' END), '{}')
              FROM c
              LEFT JOIN (SELECT f.nest_parent, jsonb_agg(f.id ORDER BY f.seq) AS children
                           FROM f WHERE f.nest_parent IS NOT NULL AND f.id IS NOT NULL GROUP BY f.nest_parent) l
                ON l.nest_parent = c.id
             WHERE c.id IS NOT NULL),
           (SELECT min(c.at) FROM c)
      INTO v_bad, v_nodes, v_time;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'LibreChat message % %', v_bad[1], v_bad[2]
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad[1]);
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'librechat', v_nodes, NULL, v_time,
        jsonb_build_object('format', 'librechat', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'messages', 'requested_head', 'null'::jsonb,
                           'digest', v_digest),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_librechat(text, jsonb) IS
    'Import one LibreChat conversation export (recursive or flat; parentMessageId, the latest leaf as the head); a repeat returns the same id.';

-- import_openwebui: one Open WebUI chat (a row of its chat table or of the
-- UI's JSON export, which holds an object "chat", or the bare chat column)
-- as a new conversation of p_owner_id, by the rules of import-mapping.md
-- §5: history.messages by parentId (several roots when the first message
-- was edited; childrenIds that disagree with parentId are only counted),
-- history.currentId as the head, each message kept verbatim in
-- import_origins. Repeats, CV009, CV011 and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_openwebui(p_owner_id text, p_chat jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_row      jsonb;
    v_chat     jsonb;
    v_messages jsonb;
    v_current  jsonb;
    v_source   text;
    v_id       uuid;
    v_digest   text;
    v_where    text;
    v_bad      record;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);
    IF p_chat IS NULL OR jsonb_typeof(p_chat) <> 'object' THEN
        RAISE EXCEPTION 'p_chat must be one Open WebUI chat, a JSON object, not %', coalesce(jsonb_typeof(p_chat), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each element of an Open WebUI export on its own.';
    END IF;
    IF jsonb_typeof(p_chat -> 'chat') = 'object' THEN
        v_row := p_chat;
        v_chat := p_chat -> 'chat';
    ELSE
        v_chat := p_chat;
    END IF;
    v_messages := v_chat -> 'history' -> 'messages';
    v_current := v_chat -> 'history' -> 'currentId';
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('openwebui', 'Open WebUI chat', p_owner_id,
                                    coalesce(convo_private.nonempty_text(v_row -> 'id'),
                                             convo_private.nonempty_text(v_chat -> 'id')), p_chat) k;
    IF convo_private.import_repeat(v_id, p_owner_id, v_digest, v_where) THEN
        RETURN v_id;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'an Open WebUI chat needs a "history.messages" object, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    SELECT e.key, e.why INTO v_bad
      FROM (SELECT n.key, CASE
                   WHEN jsonb_typeof(n.msg) <> 'object' THEN 'is not an object'
                   WHEN jsonb_typeof(n.msg -> 'id') NOT IN ('null') AND n.msg -> 'id' <> to_jsonb(n.key)
                       THEN 'has an id other than its key'
                   WHEN jsonb_typeof(n.msg -> 'role') IS DISTINCT FROM 'string'
                        OR n.msg ->> 'role' NOT IN ('user', 'assistant', 'system')
                       THEN 'has a missing or unknown role'
                   WHEN jsonb_typeof(n.msg -> 'parentId') NOT IN ('null')
                        AND (jsonb_typeof(n.msg -> 'parentId') <> 'string' OR NOT v_messages ? (n.msg ->> 'parentId'))
                       THEN 'names a parentId that is no message (missing parent)'
                   WHEN jsonb_typeof(n.msg -> 'childrenIds') NOT IN ('array', 'null')
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.msg -> 'childrenIds') = 'array'
                                                                           THEN n.msg -> 'childrenIds' END) c (child)
                                    WHERE jsonb_typeof(c.child) <> 'string')
                       THEN 'has childrenIds that are not an array of strings'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') NOT IN ('number', 'null')
                       THEN 'has a timestamp that is neither a number nor null'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') = 'number'
                        AND convo_private.epoch_time(n.msg -> 'timestamp', 1e11) IS NULL
                       THEN 'has a timestamp outside years 1 to 9999'
                   END AS why
              FROM jsonb_each(v_messages) AS n (key, msg)) e
     WHERE e.why IS NOT NULL
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'Open WebUI message % %', v_bad.key, v_bad.why
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad.key);
    END IF;
    IF jsonb_typeof(v_current) IS DISTINCT FROM 'null' AND v_current IS NOT NULL
       AND (jsonb_typeof(v_current) <> 'string' OR NOT v_messages ? (v_current #>> '{}')) THEN
        RAISE EXCEPTION 'history.currentId names no message'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, currentId %s', v_where, left(v_current::text, convo_private.max_id_length()));
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'openwebui', v_messages,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        coalesce(convo_private.epoch_time(v_row -> 'created_at', 1e11), convo_private.epoch_time(v_chat -> 'timestamp', 1e11)),
        jsonb_build_object('format', 'openwebui', 'source_id', v_source,
                           'title', coalesce(nullif(v_row -> 'title', 'null'), v_chat -> 'title'),
                           'chat', v_chat - 'history' - 'messages', 'row', v_row - 'chat',
                           'requested_head', coalesce(v_current, 'null'), 'digest', v_digest),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_openwebui(text, jsonb) IS
    'Import one Open WebUI chat (history.messages by parentId, currentId as the head); a repeat returns the same id.';

-- self_check: every invariant a DBA can verify on a live database, one row
-- per check, ok or not with the offenders (the first 10) in detail. It reads
-- every row of the package once per check: run it from a maintenance job or
-- `migrate verify`, not from a request.
CREATE OR REPLACE FUNCTION convo.self_check()
RETURNS TABLE (check_name text, ok boolean, detail text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad text[];
BEGIN
    -- Triggers: each of the package's present and ENABLE ALWAYS (so neither
    -- session_replication_role nor a plain ENABLE skips it), by what it guards.
    FOR check_name, v_bad IN
        SELECT g.guards, array_agg(g.table_name || '.' || g.trigger_name || ' '
                                   || CASE WHEN tg.oid IS NULL THEN 'missing' ELSE 'enabled=' || tg.tgenabled::text END
                                   ORDER BY g.table_name, g.trigger_name)
                             FILTER (WHERE tg.oid IS NULL OR tg.tgenabled <> 'A')
          FROM convo_private.package_triggers() g
          LEFT JOIN pg_trigger tg ON tg.tgname = g.trigger_name
               AND tg.tgrelid = to_regclass('convo.' || g.table_name)
         GROUP BY g.guards
    LOOP
        check_name := CASE check_name WHEN 'append_only' THEN 'append_only_triggers'
                                      WHEN 'head_log' THEN 'head_log_trigger' ELSE 'rule_triggers' END;
        ok := v_bad IS NULL;
        detail := coalesce(array_to_string(v_bad[1:10], '; '), 'all present, enabled always');
        RETURN NEXT;
    END LOOP;

    -- No trigger of anyone else's on the package's tables: with TRIGGER
    -- privilege a role could rewrite rows on their way in.
    SELECT array_agg(c.relname || '.' || tg.tgname ORDER BY c.relname, tg.tgname) INTO v_bad
      FROM pg_trigger tg
      JOIN pg_class c ON c.oid = tg.tgrelid
     WHERE c.relnamespace = 'convo'::regnamespace AND NOT tg.tgisinternal
       AND NOT EXISTS (SELECT 1 FROM convo_private.package_triggers() g
                        WHERE g.table_name = c.relname AND g.trigger_name = tg.tgname);
    RETURN QUERY SELECT 'no_foreign_triggers', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'none');

    -- Every head equals its last head-log row, and each log row starts where
    -- the one before it ended.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ' head ' || coalesce(c.head_message_id::text, 'none')
               || ', last logged ' || coalesce(last.head_message_id::text, 'none') AS id
          FROM convo.conversations c
          LEFT JOIN LATERAL (SELECT l.head_message_id FROM convo.conversation_head_log l
                              WHERE l.conversation_id = c.id ORDER BY l.seq DESC LIMIT 1) last ON true
         WHERE c.head_message_id IS DISTINCT FROM last.head_message_id
        UNION ALL
        SELECT 'conversation ' || l.conversation_id || ' log seq ' || l.seq || ' does not start where '
               || coalesce('seq ' || l.prev_seq || ' ended', 'the conversation began')
          FROM (SELECT l.*, lag(l.head_message_id) OVER w AS prev_head, lag(l.seq) OVER w AS prev_seq
                  FROM convo.conversation_head_log l
                WINDOW w AS (PARTITION BY l.conversation_id ORDER BY l.seq)) l
         WHERE l.previous_head_id IS DISTINCT FROM l.prev_head) x;
    RETURN QUERY SELECT 'heads_match_log', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every head is its last logged move');

    -- The live-path index (convo.live_path, what path reads) holds exactly
    -- the path from the root to each head, with its sibling counts, walked
    -- from the tree here. Repair: convo_private.rebuild_live_path(id).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ': ' || d.n || ' live_path rows differ from the path to its head' AS id
          FROM convo.conversations c
         CROSS JOIN LATERAL (
               SELECT count(*) AS n
                 FROM convo_private.path_from(c.id, c.head_message_id, NULL) p
                 FULL JOIN (SELECT l.* FROM convo.live_path l WHERE l.conversation_id = c.id) l ON l.depth = p.depth
                WHERE p.message_id IS DISTINCT FROM l.message_id OR p.sibling_count IS DISTINCT FROM l.sibling_count) d
         WHERE d.n > 0
        UNION ALL
        SELECT 'live_path rows of conversation ' || l.conversation_id || ', which does not exist'
          FROM convo.live_path l
         WHERE NOT EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = l.conversation_id)
         GROUP BY l.conversation_id) x;
    RETURN QUERY SELECT 'live_path_index', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every live path is its head''s path');

    -- Every effect was created by exactly one call (execute, confirm or
    -- rejected) and every link names a tool_use of the effect's tool.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' has ' || count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse')
               || ' creating calls' AS id
          FROM convo.tool_effects e
          LEFT JOIN convo.tool_effect_calls l ON l.conversation_id = e.conversation_id AND l.effect_id = e.id
         GROUP BY e.conversation_id, e.id
        HAVING count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse') <> 1
        UNION ALL
        SELECT 'call ' || l.tool_call_id || ' of conversation ' || l.conversation_id || ' links a part that is not its tool_use'
          FROM convo.tool_effect_calls l
          JOIN convo.message_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
         WHERE p.type <> 'tool_use' OR p.tool_call_id <> l.tool_call_id
            OR (e.id IS NOT NULL AND e.tool_name <> p.tool_name)) x;
    RETURN QUERY SELECT 'effects_linked', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every effect and link is consistent');

    -- Every effect's events form one chain from 'requested' to its state, and
    -- every CHECK that ties a state to its columns is in force (validated).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' is ' || e.state || ', its events end at '
               || coalesce(last.to_state, 'nothing') AS id
          FROM convo.tool_effects e
          LEFT JOIN LATERAL (SELECT ev.to_state FROM convo.tool_effect_events ev
                              WHERE ev.conversation_id = e.conversation_id AND ev.effect_id = e.id
                              ORDER BY ev.seq DESC LIMIT 1) last ON true
         WHERE last.to_state IS DISTINCT FROM e.state
        UNION ALL
        SELECT 'effect ' || ev.effect_id || ' event ' || ev.seq || ' starts from ' || ev.from_state
          FROM (SELECT ev.*, lag(ev.to_state, 1, 'requested') OVER (PARTITION BY ev.conversation_id, ev.effect_id
                                                                   ORDER BY ev.seq) AS prev_state
                  FROM convo.tool_effect_events ev) ev
         WHERE ev.from_state <> ev.prev_state
        UNION ALL
        SELECT 'constraint ' || con.conname || ' is not validated'
          FROM pg_constraint con
         WHERE con.connamespace = 'convo'::regnamespace AND NOT con.convalidated) x;
    RETURN QUERY SELECT 'effect_states_consistent', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every state matches its event chain');

    -- Row-level security on every owner-scoped table. It is enabled, not
    -- forced: the API functions run as the owner role and check the owner
    -- once per call (sees_owner, writes_owner), which keeps the path at the
    -- cost of a flat read; any other role is bound by the policies.
    SELECT array_agg(t.name ORDER BY t.name) INTO v_bad
      FROM unnest(ARRAY['conversations', 'messages', 'message_parts', 'conversation_head_log', 'generations',
                        'tool_effects', 'tool_effect_calls', 'tool_effect_events', 'tool_receipts',
                        'erasures', 'erasure_places', 'live_path',
                        'import_origins']) AS t (name)
      LEFT JOIN pg_class c ON c.oid = to_regclass('convo.' || t.name)
     WHERE c.relrowsecurity IS NOT TRUE;
    RETURN QUERY SELECT 'row_level_security', v_bad IS NULL,
                        coalesce('not enabled on ' || array_to_string(v_bad, ', '),
                                 'enabled on every owner-scoped table');

    -- Privileges exactly as documented: nothing for PUBLIC, nothing on a table
    -- for convo_app, nothing at all on convo_private.
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        (SELECT 'extra: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee AS d
           FROM (SELECT * FROM convo_private.granted_privileges()
                 EXCEPT SELECT * FROM convo_private.documented_grants()) g)
        UNION ALL
        (SELECT 'missing: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee
           FROM (SELECT * FROM convo_private.documented_grants()
                 EXCEPT SELECT * FROM convo_private.granted_privileges()) g)) x;
    RETURN QUERY SELECT 'privileges', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'exactly as documented');

    -- Every object belongs to convo_owner, which cannot log in, is no
    -- superuser, and has no member that can (read from pg_auth_members, not
    -- pg_has_role, which fails on a role dropped while the query runs).
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        SELECT 'schema ' || n.nspname || ' owned by ' || pg_get_userbyid(n.nspowner) AS d
          FROM pg_namespace n
         WHERE n.nspname IN ('convo', 'convo_private') AND pg_get_userbyid(n.nspowner) <> 'convo_owner'
        UNION ALL
        SELECT 'relation ' || c.oid::regclass || ' owned by ' || pg_get_userbyid(c.relowner)
          FROM pg_class c
         WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(c.relowner) <> 'convo_owner'
        UNION ALL
        SELECT 'function ' || p.oid::regprocedure || ' owned by ' || pg_get_userbyid(p.proowner)
          FROM pg_proc p
         WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(p.proowner) <> 'convo_owner'
        UNION ALL
        SELECT 'role convo_owner can log in or is a superuser'
          FROM pg_roles r WHERE r.rolname = 'convo_owner' AND (r.rolcanlogin OR r.rolsuper)
        UNION ALL
        SELECT 'login role ' || r.rolname || ' is a member of convo_owner'
          FROM (WITH RECURSIVE members (oid) AS (
                    SELECT m.member FROM pg_auth_members m WHERE m.roleid = 'convo_owner'::regrole
                    UNION
                    SELECT m.member FROM pg_auth_members m JOIN members ON m.roleid = members.oid)
                SELECT members.oid FROM members) mm
          JOIN pg_roles r ON r.oid = mm.oid
         WHERE r.rolcanlogin AND NOT r.rolsuper) x;
    RETURN QUERY SELECT 'ownership', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every object owned by convo_owner, which no login role can become');
END;
$$;

COMMENT ON FUNCTION convo.self_check() IS
    'Every invariant a DBA can verify on a live database: one row per check, ok, and the offenders in detail.';

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
            ('message_parts', 'body', 'conversation_id'),
            ('conversations', 'metadata', 'id'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id'),
            ('tool_effects', 'arguments', 'conversation_id'),
            ('tool_effect_events', 'evidence', 'conversation_id'),
            ('import_origins', 'node', 'conversation_id'),
            ('tool_receipts', 'request, arguments, expected', 'owner_id')) AS p (tab, cols, key)
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
END;
$$;

-- import_key: the one rule for an import's ids (import-mapping.md §4.2, §5):
-- the source id (the export's own, else 'sha:' and the md5 of the JSON), the
-- conversation id md5(kind || ':' || owner || ':' || source), where to say
-- the import was going in a DETAIL (p_label names the source's kind), and
-- the digest of the source text that tells a repeat (import_repeat).
CREATE OR REPLACE FUNCTION convo_private.import_key(
    p_kind     text,
    p_label    text,
    p_owner_id text,
    p_source   text,
    p_doc      jsonb,
    OUT source          text,
    OUT conversation_id uuid,
    OUT place           text,
    OUT digest          text)
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT k.source, k.id,
           format('%s %s of owner %s, conversation %s', p_label, k.source, p_owner_id, k.id),
           encode(sha256(convert_to(p_doc::text, 'UTF8')), 'hex')
      FROM (SELECT s.source, md5(p_kind || ':' || p_owner_id || ':' || s.source)::uuid AS id
              FROM (SELECT coalesce(p_source, 'sha:' || md5(p_doc::text)) AS source) s) k;
END;

SELECT convo_private.apply_grants();

-- import_repeat: whether an import's conversation id is already taken:
-- false if not; true if by this very import (same owner, and the same
-- source text, by its digest in metadata.import): a repeat, which writes
-- nothing; CV009 if by anything else (the same source with other content,
-- a later export of a conversation that went on, or an erased one). Locks
-- the row as every writer does.
CREATE OR REPLACE FUNCTION convo_private.import_repeat(p_conversation_id uuid, p_owner_id text, p_digest text, p_where text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_existing convo.conversations;
BEGIN
    SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = p_conversation_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_existing.owner_id = p_owner_id AND v_existing.metadata -> 'import' ->> 'digest' = p_digest THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'conversation % was imported before from the same source with other content', p_conversation_id
        USING ERRCODE = 'CV009', DETAIL = p_where,
              HINT = 'An import is not merged into an earlier one: the source changed since it was imported.';
END;
$$;

-- import_tree: the shared second half of import_chatgpt, import_openwebui
-- and import_librechat, once the source is checked: the tree (import-mapping.md §4.3-§4.6, §4.10,
-- §4.12) written as one new conversation. Imported messages are the nodes
-- whose message is an object; each hangs under its nearest imported
-- ancestor (import_walk) with its original time; siblings are inserted in
-- the order (time, position in the source parent's children, key bytewise),
-- which is their sibling_index, with branch reasons by role; the head is
-- the nearest imported node at or above p_current, else the latest leaf;
-- each message's source node is kept in import_origins. Caps are checked
-- first (CV010 naming the node); no ledger row, receipt or generation is
-- written. Every step is a pass or a hash join over the nodes: linear.
CREATE OR REPLACE FUNCTION convo_private.import_tree(
    p_conversation_id uuid,
    p_owner_id        text,
    p_source          text,
    p_mapping         jsonb,
    p_current         text,
    p_conv_time       timestamptz,
    p_metadata        jsonb,
    p_where           text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_keys       text[];
    v_parent     int[];
    v_imported   boolean[];
    v_time       timestamptz[];
    v_dropped    jsonb;
    v_imp        int[];
    v_depth      int[];
    v_at         timestamptz[];
    -- the messages, in insertion order
    m_idx        int[];
    m_imp        int[];
    m_key        text[];
    m_id         uuid[];
    m_parent     uuid[];
    m_role       text[];
    m_reason     text[];
    m_parts      jsonb[];
    m_at         timestamptz[];
    m_node       jsonb[];
    v_mismatches bigint;
    v_i          int;
    v_head_idx   int;
    v_head       uuid;
    v_fallback   text;
    v_bad        record;
    v_metadata   jsonb;
BEGIN
    -- The nodes as arrays in key order, each parent as an index (0: none).
    WITH n AS MATERIALIZED (SELECT * FROM convo_private.import_nodes(p_source, p_mapping))
    SELECT coalesce(array_agg(n.key ORDER BY n.idx), '{}'),
           coalesce(array_agg(coalesce(p.idx, 0) ORDER BY n.idx), '{}'),
           coalesce(array_agg(jsonb_typeof(n.message) IS NOT DISTINCT FROM 'object' ORDER BY n.idx), '{}'),
           coalesce(array_agg(n.at ORDER BY n.idx), '{}'),
           coalesce(jsonb_object_agg(n.key, n.node) FILTER (WHERE jsonb_typeof(n.message) IS DISTINCT FROM 'object'), '{}')
      INTO v_keys, v_parent, v_imported, v_time, v_dropped
      FROM n LEFT JOIN n p ON p.key = n.parent_key;

    SELECT * INTO v_imp, v_depth, v_at
      FROM convo_private.import_walk(v_keys, v_parent, v_imported, v_time, coalesce(p_conv_time, v_now), p_where);

    -- The messages: role and parts (given the imported parent), sibling
    -- order and branch reason; and the children lists' disagreements.
    WITH n AS MATERIALIZED (
        SELECT n.*, x.imp, x.depth, x.at AS created_at
          FROM convo_private.import_nodes(p_source, p_mapping) n
          JOIN unnest(v_imp, v_depth, v_at) WITH ORDINALITY AS x (imp, depth, at, idx) ON x.idx = n.idx
    ), listed AS MATERIALIZED (
        SELECT n.key AS parent_key, c.child, min(c.ord) AS ord
          FROM n, jsonb_array_elements_text(CASE WHEN jsonb_typeof(n.children) = 'array' THEN n.children ELSE '[]' END)
                  WITH ORDINALITY AS c (child, ord)
         GROUP BY n.key, c.child
    ), m AS MATERIALIZED (
        SELECT n.idx, n.imp, n.key, n.node, n.depth, n.created_at, l.ord, p.key AS imp_parent_key,
               CASE p_source WHEN 'chatgpt' THEN convo_private.chatgpt_message(n.key, n.message, p.key, p.message)
                             WHEN 'librechat' THEN convo_private.librechat_message(n.message)
                             ELSE convo_private.openwebui_message(n.message) END AS rp
          FROM n
          LEFT JOIN n p ON p.idx = n.imp
          LEFT JOIN listed l ON l.parent_key = n.parent_key AND l.child = n.key
         WHERE jsonb_typeof(n.message) = 'object'
    ), o AS (
        SELECT m.*, m.rp ->> 'role' AS role, row_number() OVER s AS sib, first_value(m.rp ->> 'role') OVER s AS first_role
          FROM m
        WINDOW s AS (PARTITION BY m.imp ORDER BY m.created_at, m.ord NULLS LAST, m.key COLLATE "C")
    )
    SELECT array_agg(o.idx ORDER BY o.depth, o.imp, o.sib), array_agg(o.imp ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.key ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.imp_parent_key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.role ORDER BY o.depth, o.imp, o.sib),
           array_agg(CASE WHEN o.sib = 1 THEN NULL
                          WHEN o.role = 'user' AND o.first_role = 'user' THEN 'user_edit'
                          WHEN o.role = 'assistant' AND o.first_role = 'assistant' THEN 'regenerate'
                          ELSE 'branch' END ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.rp -> 'parts' ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.created_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.node ORDER BY o.depth, o.imp, o.sib),
           -- (A LibreChat message whose children were not read, every one of
           -- a flat export, lists nothing to disagree with.)
           (SELECT count(*)
              FROM (SELECT c.parent_key, c.key FROM n c JOIN n p ON p.key = c.parent_key
                     WHERE p_source <> 'librechat' OR p.children IS NOT NULL) a
              FULL JOIN listed b ON b.parent_key = a.parent_key AND b.child = a.key
             WHERE a.key IS NULL OR b.child IS NULL)
      INTO m_idx, m_imp, m_key, m_id, m_parent, m_role, m_reason, m_parts, m_at, m_node, v_mismatches
      FROM o;

    -- Caps, before anything is written: CV010 naming the first node over one.
    SELECT x.key, x.why INTO v_bad
      FROM (SELECT x.key, CASE
                   WHEN octet_length(x.parts::text) > convo.max_message_bytes()
                       THEN format('a message of %s bytes (max_message_bytes %s)', octet_length(x.parts::text), convo.max_message_bytes())
                   WHEN octet_length(x.node::text) > convo.max_message_bytes()
                       THEN format('a source node of %s bytes (max_message_bytes %s)', octet_length(x.node::text), convo.max_message_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE octet_length(p.part::text) > convo.max_part_bytes())
                       THEN format('a part over max_part_bytes %s', convo.max_part_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE p.part ->> 'type' = 'tool_use'
                                   AND octet_length((p.part -> 'input')::text) > convo.max_tool_input_bytes())
                       THEN format('a tool input over max_tool_input_bytes %s', convo.max_tool_input_bytes())
                   WHEN length(x.key) > convo_private.max_id_length() AND x.parts -> 0 ->> 'type' = 'tool_use'
                       THEN format('a tool call id (the node key) of %s characters (at most %s)', length(x.key), convo_private.max_id_length())
                   END AS why
              FROM unnest(m_key, m_parts, m_node) AS x (key, parts, node)) x
     WHERE x.why IS NOT NULL
     ORDER BY x.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the import is over a size cap at node %', v_bad.key
            USING ERRCODE = 'CV010', DETAIL = format('%s, node %s: %s', p_where, v_bad.key, v_bad.why);
    END IF;

    -- The head: the nearest imported node at or above p_current, else the latest leaf.
    IF p_current IS NOT NULL THEN
        v_i := array_position(v_keys, p_current);
        v_head_idx := CASE WHEN v_imported[v_i] THEN v_i ELSE nullif(v_imp[v_i], 0) END;
    END IF;
    IF v_head_idx IS NOT NULL THEN
        v_head := md5(p_conversation_id::text || ':' || v_keys[v_head_idx])::uuid;
    ELSE
        SELECT x.id INTO v_head
          FROM unnest(m_id, m_idx, m_at, m_key) AS x (id, idx, at, key)
         WHERE NOT EXISTS (SELECT 1 FROM unnest(m_imp) AS c (imp) WHERE c.imp = x.idx)
         ORDER BY x.at DESC, x.key COLLATE "C" DESC
         LIMIT 1;
        v_fallback := CASE WHEN v_head IS NOT NULL THEN 'latest_leaf' END;
    END IF;

    v_metadata := jsonb_build_object('import', p_metadata || jsonb_build_object(
        'dropped_nodes', v_dropped, 'children_mismatches', v_mismatches, 'head_fallback', v_fallback));
    IF octet_length(v_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'the import''s conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: metadata of %s bytes', p_where, octet_length(v_metadata::text));
    END IF;

    INSERT INTO convo.conversations (id, owner_id, metadata, created_at)
    VALUES (p_conversation_id, p_owner_id, v_metadata,
            coalesce(p_conv_time, (SELECT min(a) FROM unnest(m_at) AS a), v_now))
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- The same import committed by another session meanwhile.
        PERFORM convo_private.import_repeat(p_conversation_id, p_owner_id, p_metadata ->> 'digest', p_where);
        RETURN p_conversation_id;
    END IF;

    -- While the import's marker row names the conversation (is_import, as
    -- for import_conversation), messages_fill_tree keeps the messages' times
    -- and record_tool_call writes no ledger row. Origins (their foreign key
    -- is deferred), then the messages, parents before children, siblings in
    -- order; the head moves after the marker is gone, logged as any move.
    INSERT INTO convo_private.importing (conversation_id) VALUES (p_conversation_id);
    PERFORM set_config('convo.importing', p_conversation_id::text, true);
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT p_conversation_id, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts, created_at)
    SELECT p_conversation_id, x.id, x.parent, x.role, x.reason, x.parts, x.at
      FROM unnest(m_id, m_parent, m_role, m_reason, m_parts, m_at) WITH ORDINALITY AS x (id, parent, role, reason, parts, at, n)
     ORDER BY x.n;
    DELETE FROM convo_private.importing i WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id();
    PERFORM set_config('convo.importing', '', true);
    IF v_head IS NOT NULL THEN
        PERFORM convo_private.move_head_to(p_conversation_id, v_head, 'import', NULL);
    END IF;
    RETURN p_conversation_id;
END;
$$;

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment. An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered), and neither
-- does a call an import is writing (is_import): the imports from other
-- products write none, that history happened elsewhere; import_conversation
-- writes its exported ledger rows itself.
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key: the call is linked to it.
--   confirm:  a re-run (same tool, same fork point, an earlier call on another
--             branch) under a new key: held in awaiting_confirmation.
--   execute:  a new pending effect under the scope key.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Planned afresh for each call: a message of N calls grows the ledger
-- within one statement, and a plan cached while the tables were nearly
-- empty (a sequential scan) would make each call cost the calls before it.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := NEW.body -> 'input';
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
    v_effect    convo.tool_effects;
    v_repeats   uuid;
    v_decision  text;
BEGIN
    IF convo_private.is_import(NEW.conversation_id) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = NEW.tool_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_fork := convo_private.fork_point_of(NEW.conversation_id, NEW.message_id);
    v_errors := CASE WHEN v_tool.effectful THEN convo.args_errors(v_tool.args_schema, v_input) END;
    IF NOT v_tool.effectful THEN
        v_decision := 'replay';
    ELSIF cardinality(v_errors) > 0 THEN
        -- Rejected calls never deduplicate: the key is the call's own.
        v_decision := 'rejected';
        v_scope_key := 'rejected:' || encode(sha256(convert_to(NEW.conversation_id || '|' || NEW.tool_call_id, 'UTF8')), 'hex');
    ELSE
        -- Keyed (keyed_digest): the key outlives an erasure of the input.
        v_scope_key := v_tool.idempotency_scope || ':' || convo_private.keyed_digest(encode(sha256(convert_to(
            CASE v_tool.idempotency_scope
                WHEN 'tool_call' THEN NEW.conversation_id || '|' || NEW.tool_call_id
                WHEN 'conversation_args' THEN NEW.conversation_id || '|' || v_tool.name || '|' || v_input::text
                WHEN 'fork_args' THEN NEW.conversation_id || '|' || coalesce(v_fork::text, 'conversation')
                                      || '|' || v_tool.name || '|' || v_input::text
            END, 'UTF8')), 'hex'));
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = NEW.conversation_id AND e.scope_key = v_scope_key;
        IF FOUND THEN
            v_decision := 'reuse';
        ELSE
            -- Re-run candidates come from other messages at the same fork point
            -- (the calls of this very message are on its path by definition):
            -- two ranges of tool_effect_calls_fork_idx skip this message's
            -- calls, so N calls in one message cost N lookups, not N squared.
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = NEW.conversation_id
               AND (l.fork_point_id = v_fork OR (v_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < NEW.message_id OR l.message_id > NEW.message_id)
               AND e.tool_name = NEW.tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_path(NEW.conversation_id, l.message_id, NEW.message_id)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        PERFORM convo_private.set_effect_context(NULL, CASE WHEN v_decision = 'rejected'
                                                    THEN jsonb_build_object('errors', to_jsonb(v_errors)) END);
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, deadline_at, settled_at, http_status, error_code)
        VALUES
            (NEW.conversation_id, gen_random_uuid(), v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE v_decision WHEN 'execute' THEN 'pending' WHEN 'confirm' THEN 'awaiting_confirmation' ELSE 'failed' END,
             v_input,
             CASE WHEN jsonb_typeof(v_input -> v_tool.amount_arg) = 'number'
                   AND (v_input ->> v_tool.amount_arg)::numeric = trunc((v_input ->> v_tool.amount_arg)::numeric)
                   AND abs((v_input ->> v_tool.amount_arg)::numeric) < 9e18
                  THEN (v_input ->> v_tool.amount_arg)::numeric::bigint END,
             CASE WHEN v_input ->> v_tool.currency_arg ~ '^[A-Z]{3}$' THEN v_input ->> v_tool.currency_arg END,
             v_repeats,
             clock_timestamp() + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN clock_timestamp() END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.set_effect_context(NULL, NULL);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id)
    VALUES (NEW.conversation_id, NEW.tool_call_id, NEW.message_id, NEW.ordinal, v_effect.id, v_decision, v_fork);
    RETURN NULL;
END;
$$;

-- documented_grants: every privilege pgconvo grants, as data (the README's
-- "Security" section in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's (the allowlist, the
-- sweeps, erasure) for convo_admin, a member of both; SELECT on the views
-- for convo_app, on every table and view for convo_reader. Nothing for
-- PUBLIC, nothing at all on convo_private. A function added later is nobody's until it is listed here.
-- apply_grants makes the catalog say exactly this; self_check compares.
CREATE OR REPLACE FUNCTION convo_private.documented_grants()
RETURNS TABLE (object_kind text, object_name text, grantee text, privilege text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'SCHEMA', 'convo', r.grantee, 'USAGE'
      FROM unnest(ARRAY['convo_app', 'convo_reader', 'convo_admin']) AS r (grantee)
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, g.grantee, 'EXECUTE'
      FROM pg_proc p
      JOIN (VALUES ('convo_app', ARRAY['create_conversation', 'append_message', 'edit_and_resend', 'regenerate',
                                       'move_head', 'path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                       'begin_generation', 'complete_generation', 'fail_generation',
                                       'cancel_generation', 'effect_for_call', 'settle_effect', 'compensate_effect',
                                       'confirm_effect', 'decline_effect', 'begin_receipt', 'fill_receipt',
                                       'apply_receipt', 'fail_receipt', 'args_errors', 'generation_stale_after',
                                       'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                       'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                       'max_ref_length', 'request_messages', 'request_digest',
                                       'import_chatgpt', 'import_openwebui', 'import_librechat',
                                       'export_conversation', 'import_conversation']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length', 'request_messages', 'request_digest',
                                          'export_conversation']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts', 'erase_conversation', 'erase_owner'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace;
END;

-- export_of: the export document of one conversation (format pgconvo.export,
-- version 1; every key is described in the README and on
-- convo.export_conversation), without an owner check: export_conversation
-- checks the reader, import_conversation compares an import with what it
-- stored. Every row is the table's own row as jsonb, without the
-- conversation id it repeats, in a fixed order, and times print in UTC, so
-- the same rows give the same text in any session and any database.
CREATE OR REPLACE FUNCTION convo_private.export_of(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
BEGIN ATOMIC
    SELECT jsonb_build_object(
        'format', 'pgconvo.export',
        'version', 1,
        'conversation', to_jsonb(c),
        'messages', coalesce((SELECT jsonb_agg(to_jsonb(m) - 'conversation_id' ORDER BY m.depth, m.parent_id, m.sibling_index)
                                FROM convo.messages m WHERE m.conversation_id = c.id), '[]'),
        'head_log', coalesce((SELECT jsonb_agg(to_jsonb(l) - 'conversation_id' ORDER BY l.seq)
                                FROM convo.conversation_head_log l WHERE l.conversation_id = c.id), '[]'),
        'generations', coalesce((SELECT jsonb_agg(to_jsonb(g) - 'conversation_id' ORDER BY g.started_at, g.id)
                                   FROM convo.generations g WHERE g.conversation_id = c.id), '[]'),
        'tools', coalesce((SELECT jsonb_agg(to_jsonb(t) - 'registered_at' - 'registered_by' ORDER BY t.name, t.version)
                             FROM convo.tools t
                            WHERE (t.name, t.version) IN (SELECT e.tool_name, e.tool_version FROM convo.tool_effects e
                                                           WHERE e.conversation_id = c.id)), '[]'),
        'tool_calls', coalesce((SELECT jsonb_agg(to_jsonb(k) - 'conversation_id' ORDER BY k.decided_at, k.tool_call_id)
                                  FROM convo.tool_effect_calls k WHERE k.conversation_id = c.id), '[]'),
        'effects', coalesce((SELECT jsonb_agg(to_jsonb(e) - 'conversation_id' ORDER BY e.requested_at, e.id)
                               FROM convo.tool_effects e WHERE e.conversation_id = c.id), '[]'),
        'effect_events', coalesce((SELECT jsonb_agg(to_jsonb(v) - 'conversation_id' ORDER BY v.seq)
                                     FROM convo.tool_effect_events v WHERE v.conversation_id = c.id), '[]'),
        'erasures', coalesce((SELECT jsonb_agg(to_jsonb(r) - 'conversation_id' - 'xact'
                                               || jsonb_build_object('places', coalesce(
                                                      (SELECT jsonb_agg(jsonb_build_object('place', p.place, 'rows_redacted', p.rows_redacted)
                                                                        ORDER BY p.place)
                                                         FROM convo.erasure_places p
                                                        WHERE p.owner_id = r.owner_id AND p.erasure_id = r.id), '[]'))
                                               ORDER BY r.erased_at, r.id)
                                FROM convo.erasures r WHERE r.conversation_id = c.id), '[]'),
        -- Import origins: the source node of each message that came from
        -- another product (import_chatgpt, import_openwebui), by message.
        'origins', coalesce((SELECT jsonb_agg(to_jsonb(o) - 'conversation_id' ORDER BY o.message_id)
                               FROM convo.import_origins o WHERE o.conversation_id = c.id), '[]'))
      FROM convo.conversations c
     WHERE c.id = p_conversation_id;
END;

SELECT convo_private.apply_grants();

-- package_triggers: every trigger pgconvo puts on its tables, by what it
-- guards: append_only (refuse_change, refuse_forgery), head_log (the head
-- log's writer and the guard that names direct updates) and rule (the tree,
-- the state machines, the ledger, the notifications of convo_head and
-- convo_effect). self_check requires each present and
-- ENABLE ALWAYS, and no other trigger on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversation_head_log', 'conversation_head_log_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_no_forgery', 'append_only'),
        ('conversations', 'conversations_no_delete', 'append_only'),
        ('conversations', 'conversations_erasure_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_fixed', 'append_only'),
        ('live_path', 'live_path_no_forgery', 'append_only'),
        ('generations', 'generations_no_delete', 'append_only'),
        ('message_parts', 'message_parts_append_only', 'append_only'),
        ('message_parts', 'message_parts_no_forgery', 'append_only'),
        ('message_parts', 'message_parts_erasure_only', 'append_only'),
        ('messages', 'messages_append_only', 'append_only'),
        ('messages', 'messages_erasure_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_append_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_erasure_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_no_delete', 'append_only'),
        ('tool_effects', 'tool_effects_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_delete', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_forgery', 'append_only'),
        ('erasures', 'erasures_append_only', 'append_only'),
        ('erasures', 'erasures_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_no_forgery', 'append_only'),
        ('tools', 'tools_append_only', 'append_only'),
        ('tools', 'tools_no_forgery', 'append_only'),
        ('import_origins', 'import_origins_append_only', 'append_only'),
        ('import_origins', 'import_origins_erasure_only', 'append_only'),
        ('import_origins', 'import_origins_no_forgery', 'append_only'),
        ('conversations', 'conversations_guard', 'head_log'),
        ('conversations', 'conversations_head_log', 'head_log'),
        ('generations', 'generations_transition', 'rule'),
        ('message_parts', 'message_parts_check', 'rule'),
        ('message_parts', 'message_parts_record_tool_call', 'rule'),
        ('messages', 'messages_fill_tree', 'rule'),
        ('messages', 'messages_split_parts', 'rule'),
        ('tool_effects', 'tool_effects_log', 'rule'),
        ('tool_effects', 'tool_effects_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_transition', 'rule'),
        ('conversation_head_log', 'conversation_head_log_notify', 'rule'),
        ('tool_effect_events', 'tool_effect_events_notify', 'rule'),
        ('tool_receipts', 'tool_receipts_notify', 'rule')) AS t (table_name, trigger_name, guards);
END;

-- redact_row: what erasure leaves of a row of a table that holds content,
-- the row given and returned as jsonb: the one place that says what erasure
-- redacts. It keeps the shape (ids, times, states, amounts, currencies,
-- external references, who did what) and empties the content: message parts
-- (the array on the message and each per-part row), conversation metadata,
-- generation params, request digest, usage and error detail, effect
-- arguments, event evidence, an imported message's source node, a
-- receipt's request, arguments and expected values. Idempotent. erase_content writes it; is_erasure lets only it through.
CREATE OR REPLACE FUNCTION convo_private.redact_row(p_table text, p_row jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN p_row || CASE p_table
    WHEN 'messages' THEN jsonb_build_object('parts',
        (SELECT jsonb_agg(convo_private.redact_part(e.part) ORDER BY e.n)
           FROM jsonb_array_elements(p_row -> 'parts') WITH ORDINALITY AS e (part, n)))
    WHEN 'message_parts' THEN jsonb_build_object('body', convo_private.redact_part(p_row -> 'body'))
    WHEN 'conversations' THEN '{"metadata": {}}'::jsonb
    WHEN 'generations' THEN jsonb_build_object('params', '{}'::jsonb, 'request_digest', NULL,
        'usage', CASE WHEN jsonb_typeof(p_row -> 'usage') <> 'null' THEN '{}'::jsonb END,
        'error', CASE WHEN jsonb_typeof(p_row -> 'error') <> 'null' THEN '{}'::jsonb END)
    WHEN 'tool_effects' THEN '{"arguments": {}}'::jsonb
    WHEN 'tool_effect_events' THEN '{"evidence": {}}'::jsonb
    WHEN 'import_origins' THEN '{"node": {"erased": true}}'::jsonb
    WHEN 'tool_receipts' THEN jsonb_build_object('request', '{}'::jsonb,
        'arguments', CASE WHEN jsonb_typeof(p_row -> 'arguments') <> 'null' THEN '{}'::jsonb END,
        'expected', CASE WHEN jsonb_typeof(p_row -> 'expected') <> 'null' THEN '{}'::jsonb END)
END;

DROP TRIGGER imports_no_forgery ON convo.imports;

DROP TRIGGER imports_erasure_only ON convo.imports;

DROP TRIGGER imports_append_only ON convo.imports;

DROP FUNCTION convo_private.effect_money;

DROP FUNCTION convo_private.scope_key;

DROP FUNCTION convo_private.restore_problem;

DROP FUNCTION convo_private.ledger_problems;

-- Reverse the table changes here, below the objects.

DROP FUNCTION convo_private.import_repeat(text, text, text, text, text);
DROP FUNCTION convo_private.import_tree(uuid, text, text, text, text, jsonb, text, timestamptz, jsonb, text);
-- advance_identity: moves the sequence behind an identity column past
-- p_past, never back, so that rows an import kept with their exported
-- numbers are followed by larger ones (head_history orders by seq). ALTER
-- SEQUENCE holds off every nextval until the transaction ends, so the value
-- is read again under that lock before the sequence moves; an import that
-- needs no move takes no lock.
CREATE OR REPLACE FUNCTION convo_private.advance_identity(p_table text, p_column text, p_past bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq  text := pg_get_serial_sequence(p_table, p_column);
    v_last bigint;
BEGIN
    IF p_past IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('SELECT last_value FROM %s', v_seq) INTO v_last;
    IF v_last > p_past THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER SEQUENCE %s NO CYCLE', v_seq); -- the lock, no change
    EXECUTE format('SELECT last_value FROM %s', v_seq) INTO v_last;
    IF v_last <= p_past THEN
        EXECUTE format('ALTER SEQUENCE %s RESTART WITH %s', v_seq, p_past + 1);
    END IF;
END;
$$;

ALTER TABLE convo.tool_effect_calls DROP COLUMN tool_name, DROP COLUMN tool_version;
ALTER TABLE convo.erasures DROP COLUMN import_id;
ALTER TABLE convo.tool_effect_events DROP COLUMN source_seq, DROP COLUMN import_id;
ALTER TABLE convo.tool_effect_calls DROP COLUMN import_id;
ALTER TABLE convo.tool_effects DROP COLUMN import_id;
ALTER TABLE convo.generations DROP COLUMN import_id;
ALTER TABLE convo.conversation_head_log DROP COLUMN source_seq, DROP COLUMN import_id;
ALTER TABLE convo.messages DROP COLUMN import_id;
DROP TABLE convo.imports;

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
