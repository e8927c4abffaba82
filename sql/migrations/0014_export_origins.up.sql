-- 0014_export_origins: an export carries the import origins (the source node of
-- each imported message), and import_conversation writes them back.

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

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
