-- 0011_export: export_conversation and import_conversation: one conversation as
-- a versioned JSON document, and read back identically through the package's triggers.

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
-- The marker of an import in progress: import_conversation inserts its row
-- (the conversation and this transaction) before it writes the exported rows
-- and deletes it again before it returns, so is_import holds only inside
-- that one call. No role but the owner reaches convo_private.
CREATE TABLE convo_private.importing (
    conversation_id uuid NOT NULL,
    xact            xid8 NOT NULL DEFAULT pg_current_xact_id(),
    PRIMARY KEY (conversation_id, xact)
);


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
    'Everything stored about one conversation as JSON: {"format": "pgconvo.export", "version": 1, "conversation": its row, "messages": the tree with parts, "head_log", "generations", "tools": the tool versions its effects were checked against, "tool_calls": ledger decisions, "effects", "effect_events", "erasures" (with places), "origins": import origins, filled when the import tables exist}; each row as its table''s columns, times in UTC. See the README.';

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
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL'));
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not import conversations for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;

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
    IF jsonb_array_length(p_export -> 'origins') > 0 THEN
        RAISE EXCEPTION 'import origins are not imported yet'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, %s origins', p_owner_id, jsonb_array_length(p_export -> 'origins'));
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
             t AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tools, p_export -> 'tools'))
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

-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. SECURITY DEFINER: it is
-- the one writer of the head log besides a superuser. The reason and mover
-- come from move_head_to (pgconvo's own moves) or conversations_guard (any
-- other UPDATE: direct_update by session_user); it clears them after use.
-- An import (is_import) writes the exported log rows instead. Every move,
-- an import's too, moves the live-path index (move_live_path) with the head.
CREATE OR REPLACE FUNCTION convo_private.log_head_move()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason   text := nullif(current_setting('convo.head_reason', true), '');
    v_moved_by text := nullif(current_setting('convo.head_moved_by', true), '');
BEGIN
    PERFORM convo_private.move_live_path(NEW.id, NEW.head_message_id);
    -- An import writes the exported head log itself, the move to its head included.
    IF convo_private.is_import(NEW.id) THEN
        RETURN NULL;
    END IF;
    IF v_reason IS NULL THEN
        v_reason := 'direct_update';
        v_moved_by := session_user;
    END IF;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;

-- messages_fill_tree: checks a new message's role and parts and computes its
-- place in the tree (depth, sibling_index, branch_id, created_at) from its
-- parent, whoever inserts it, under the conversation's row lock so that
-- concurrent writers serialize. Its time is the insert's, except for a
-- message an import is writing (import_chatgpt and import_openwebui: is_imported;
-- import_conversation: is_import), which keeps its original time.
-- The last sibling is read as the first row of messages_sibling_key in
-- reverse (ORDER BY ... LIMIT 1, parent_id in the order too, so that IS
-- NULL for a root keeps the index order): one probe whatever the number of
-- siblings or roots, even on statistics from when the table was empty.
-- A new sibling of a message on the live path raises that message's
-- sibling_count in convo.live_path.
CREATE OR REPLACE FUNCTION convo_private.messages_fill_tree()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parent convo.messages;
    -- Where the message was going: a refused message's own id is not named.
    v_where  text := format('a new %s message in conversation %s, parent %s', coalesce(NEW.role, 'NULL'),
                            NEW.conversation_id, coalesce(NEW.parent_id::text, 'none (a root)'));
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.role IS NULL OR NEW.role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'unknown role %', coalesce(quote_literal(NEW.role), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = v_where, HINT = 'Roles are system, user, assistant and tool.';
    END IF;
    PERFORM convo_private.check_parts(NEW.parts, v_where);
    IF NEW.parent_id IS NULL THEN
        NEW.depth := 0;
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id IS NULL
                                        ORDER BY m.parent_id DESC, m.sibling_index DESC LIMIT 1), 0) + 1;
        NEW.branch_id := NEW.id;
    ELSE
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        NEW.depth := v_parent.depth + 1;
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id = NEW.parent_id
                                        ORDER BY m.sibling_index DESC LIMIT 1), 0) + 1;
        NEW.branch_id := CASE WHEN NEW.sibling_index = 1 THEN v_parent.branch_id ELSE NEW.id END;
    END IF;
    IF NEW.sibling_index = 1 AND NEW.branch_reason IS NOT NULL THEN
        RAISE EXCEPTION 'a first child has no branch_reason'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, branch_reason %s', v_where, NEW.branch_reason);
    END IF;
    IF NEW.sibling_index > 1 AND NEW.branch_reason IS NULL THEN
        NEW.branch_reason := 'branch';
    END IF;
    IF NEW.sibling_index > 1 THEN
        UPDATE convo.live_path l
           SET sibling_count = NEW.sibling_index, since = clock_timestamp()
         WHERE l.conversation_id = NEW.conversation_id AND l.depth = NEW.depth
           AND (NEW.parent_id IS NULL
                OR EXISTS (SELECT 1 FROM convo.live_path p
                            WHERE p.conversation_id = NEW.conversation_id AND p.depth = NEW.depth - 1
                              AND p.message_id = NEW.parent_id));
    END IF;
    IF NEW.created_at IS NULL
       OR NOT (convo_private.is_import(NEW.conversation_id)
               OR convo_private.is_imported(NEW.conversation_id, NEW.id)) THEN
        NEW.created_at := clock_timestamp();
    END IF;
    RETURN NEW;
END;
$$;

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment. An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered), and neither
-- does an imported call: import_chatgpt and import_openwebui (is_imported)
-- write none, imported history happened elsewhere; import_conversation
-- (is_import) writes its exported ledger rows itself.
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
    IF convo_private.is_import(NEW.conversation_id)
       OR convo_private.is_imported(NEW.conversation_id, NEW.message_id) THEN
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
        v_scope_key := v_tool.idempotency_scope || ':' || encode(sha256(convert_to(
            CASE v_tool.idempotency_scope
                WHEN 'tool_call' THEN NEW.conversation_id || '|' || NEW.tool_call_id
                WHEN 'conversation_args' THEN NEW.conversation_id || '|' || v_tool.name || '|' || v_input::text
                WHEN 'fork_args' THEN NEW.conversation_id || '|' || coalesce(v_fork::text, 'conversation')
                                      || '|' || v_tool.name || '|' || v_input::text
            END, 'UTF8')), 'hex');
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

-- tool_effects_log: appends every transition of an effect (its creation
-- from 'requested' included) to tool_effect_events, with the actor and
-- evidence named by set_effect_context, or session_user and none. The
-- settings are honoured only for pgconvo's own transitions (current_user
-- convo_owner): any session can set them, so they never name who did a
-- transition made by anyone else (a superuser's direct UPDATE). An import
-- (is_import) writes the exported events instead.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_log()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF convo_private.is_import(NEW.conversation_id) THEN
        RETURN NULL; -- an import writes the exported events itself
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition (tool_effects_transition let only an identical row through)
    END IF;
    INSERT INTO convo.tool_effect_events (conversation_id, effect_id, from_state, to_state, actor, evidence)
    VALUES (NEW.conversation_id, NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_actor', true), ''), session_user)
                 ELSE session_user END,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_evidence', true), '')::jsonb, '{}')
                 ELSE '{}' END);
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
                                       'import_chatgpt', 'import_openwebui',
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
        -- Import origins (the source nodes of an import from another product),
        -- filled when the import tables exist.
        'origins', '[]'::jsonb)
      FROM convo.conversations c
     WHERE c.id = p_conversation_id;
END;

-- is_import: whether import_conversation is writing this conversation right
-- now, in this transaction: its marker row (convo_private.importing, which
-- only import_conversation writes and deletes again before it returns) names
-- the conversation and this transaction. Only then do the triggers that stamp
-- the present (messages_fill_tree, log_head_move, tool_effects_log) or decide
-- anew (record_tool_call) keep the exported rows instead. The setting is a
-- cheap hint that spares every other write the lookup; setting it proves nothing.
CREATE OR REPLACE FUNCTION convo_private.is_import(p_conversation_id uuid)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN CASE WHEN current_setting('convo.importing', true) = p_conversation_id::text
            THEN EXISTS (SELECT 1 FROM convo_private.importing i
                          WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id())
            ELSE false END;

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
