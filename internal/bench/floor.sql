-- Where the time of a write, an effectful call and a path read goes, by
-- removing one piece at a time: the bench's "what each piece costs" table.
-- Each piece is removed inside a subtransaction that is then rolled back (a
-- constraint or an index dropped, a function recreated without a statement,
-- a setting), the workload timed in-server on the bench's conversations as
-- the login member of convo_app with the owner set, and every piece is timed
-- in every round, in a rotated order, so that the machine's drift falls on
-- all alike.

-- bench.without recreates p_function with the one match of p_pattern (a
-- regular expression) replaced by p_instead; a pattern that matches other
-- than once is an error, so that the table cannot go on measuring a piece
-- the function no longer has.
CREATE FUNCTION bench.without(p_function regprocedure, p_pattern text, p_instead text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_def text := pg_get_functiondef(p_function);
    v_n   int := (SELECT count(*) FROM regexp_matches(v_def, p_pattern, 'g'));
BEGIN
    IF v_n <> 1 THEN
        RAISE EXCEPTION 'the piece % of % matches % times, not once: the table no longer fits the function',
            p_pattern, p_function, v_n;
    END IF;
    EXECUTE regexp_replace(v_def, p_pattern, p_instead);
END;
$$;

-- bench.drop_constraints drops p_table's constraints of p_type ('c' CHECK,
-- 'f' foreign key).
CREATE FUNCTION bench.drop_constraints(p_table regclass, p_type "char")
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_name name;
BEGIN
    FOR v_name IN SELECT conname FROM pg_constraint WHERE conrelid = p_table AND contype = p_type LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', p_table, v_name);
    END LOOP;
END;
$$;

-- bench.floor_pieces: each workload's pieces, in the table's order, with
-- the statements that remove each. 'pgconvo' removes nothing; 'bare' is the
-- baseline (the bench's floor statement, the same message in text for a
-- tool call, or the flat list); 'everything' removes every piece of the
-- workload at once.
CREATE TABLE bench.floor_pieces (
    workload   text   NOT NULL,
    ord        int    NOT NULL,
    piece      text   NOT NULL,
    statements text[] NOT NULL,
    PRIMARY KEY (workload, ord)
);

INSERT INTO bench.floor_pieces
WITH write_pieces (ord, piece, statements) AS (VALUES
    (2, 'the owner check', ARRAY[$s$SELECT bench.without('convo_private.lock_conversation(uuid)',
        ' AND convo_private\.sees_conversation\(c\.owner_id, c\.deleted_at, true\)', '')$s$]),
    (3, 'the API function''s SET clauses', ARRAY[
        'ALTER FUNCTION convo.append_message(uuid, text, jsonb, uuid, uuid, text) RESET ALL',
        'ALTER FUNCTION convo.edit_and_resend(uuid, uuid, jsonb, uuid, uuid, text) RESET ALL']),
    (4, 'the checks of each part', ARRAY[$s$SELECT bench.without('convo_private.write_messages(uuid, uuid, convo_private.new_message[], uuid, uuid, text, text)',
        'convo_private\.part_problem\(e\.part, m\.role\)', 'NULL::text[]')$s$]),
    (5, 'the CHECK constraints of messages', ARRAY[$s$SELECT bench.drop_constraints('convo.messages', 'c')$s$]),
    (6, 'the foreign keys of messages, the head log and the head', ARRAY[
        $s$SELECT bench.drop_constraints('convo.messages', 'f')$s$,
        $s$SELECT bench.drop_constraints('convo.conversation_head_log', 'f')$s$,
        'ALTER TABLE convo.conversations DROP CONSTRAINT conversations_head_fkey']),
    (7, 'the tree''s indexes (branch, forks, id)', ARRAY[
        'ALTER TABLE convo.messages DROP CONSTRAINT messages_branch_key',
        'DROP INDEX convo.messages_forks_idx', 'DROP INDEX convo.messages_id_idx']),
    (8, 'the search index', ARRAY[$s$SELECT bench.without('convo_private.write_messages(uuid, uuid, convo_private.new_message[], uuid, uuid, text, text)',
        'PERFORM convo_private\.index_messages\([^)]*\);', '')$s$]),
    (9, 'the sidebar''s index (the head''s UPDATE then HOT)', ARRAY['DROP INDEX convo.conversations_sidebar_idx']),
    (10, 'the head-log row', ARRAY[$s$SELECT bench.without('convo_private.log_head_move(uuid, uuid, uuid, text, text, uuid)',
        'INSERT INTO convo\.conversation_head_log.*?RETURNING seq INTO v_seq;', '')$s$]),
    (11, 'the head log''s time index (head_at)', ARRAY['DROP INDEX convo.conversation_head_log_at_idx']),
    (12, 'the live path', ARRAY[$s$SELECT bench.without('convo_private.log_head_move(uuid, uuid, uuid, text, text, uuid)',
        'UPDATE convo\.live_path.*?END IF;\s*END IF;', '')$s$]),
    (13, 'the notification', ARRAY[$s$SELECT set_config('convo.notify', 'off', true)$s$])),
read_pieces (ord, piece, statements) AS (VALUES
    (2, 'the owner check', ARRAY[$s$SELECT bench.without('convo.path(uuid)',
        ' AND convo_private\.sees_conversation\(c\.owner_id, c\.deleted_at, false\)', '')$s$]),
    (3, 'the API function''s SET clauses', ARRAY['ALTER FUNCTION convo.path(uuid) RESET ALL']),
    (4, 'the sibling counts', ARRAY[$s$SELECT bench.without('convo.path(uuid)',
        '\(SELECT jsonb_object_agg.*?GROUP BY f\.parent_id\) f\)', 'NULL::jsonb')$s$]),
    -- No statement: the timing loop reads only the flat list's four columns.
    (5, 'the columns beyond the flat list''s four', '{}')),
call_pieces (ord, piece, statements) AS (VALUES
    (2, 'the argument check', ARRAY[$s$SELECT bench.without('convo_private.record_tool_call(uuid, uuid, int, text, text, jsonb, uuid, int)',
        'convo\.args_errors\(v_tool\.args_schema, v_input\)', '''{}''::text[]')$s$]),
    (3, 'the re-run lookup', ARRAY[$s$SELECT bench.without('convo_private.record_tool_call(uuid, uuid, int, text, text, jsonb, uuid, int)',
        'convo_private\.rerun_candidate\(.*?\);', 'NULL;')$s$]),
    (4, 'the effect''s event row', ARRAY[$s$SELECT bench.without('convo_private.record_tool_call(uuid, uuid, int, text, text, jsonb, uuid, int)',
        'PERFORM convo_private\.effect_event\(.*?\);', '')$s$]),
    (5, 'the ledger''s CHECK constraints', ARRAY[$s$SELECT bench.drop_constraints('convo.tool_effects', 'c')$s$,
        $s$SELECT bench.drop_constraints('convo.tool_effect_calls', 'c')$s$, $s$SELECT bench.drop_constraints('convo.tool_effect_events', 'c')$s$]),
    (6, 'the ledger''s foreign keys', ARRAY[$s$SELECT bench.drop_constraints('convo.tool_effect_calls', 'f')$s$,
        $s$SELECT bench.drop_constraints('convo.tool_effect_events', 'f')$s$, $s$SELECT bench.drop_constraints('convo.tool_effects', 'f')$s$]),
    (7, 'the ledger''s indexes beyond its keys (open, applied, a call''s effect)', ARRAY[
        'DROP INDEX convo.tool_effects_open_idx', 'DROP INDEX convo.tool_effects_applied_idx',
        'DROP INDEX convo.tool_effect_calls_effect_idx'])),
pieces (kind, ord, piece, statements) AS (
    SELECT 'write', 1, 'pgconvo', '{}'::text[]
    UNION ALL SELECT 'write', * FROM write_pieces
    UNION ALL SELECT 'write', 100, 'everything', (SELECT array_agg(s ORDER BY w.ord, o) FROM write_pieces w, unnest(w.statements) WITH ORDINALITY AS u (s, o))
    UNION ALL SELECT 'write', 101, 'bare', '{}'
    UNION ALL SELECT 'read', 1, 'pgconvo', '{}'
    UNION ALL SELECT 'read', * FROM read_pieces
    UNION ALL SELECT 'read', 100, 'everything', (SELECT array_agg(s ORDER BY r.ord, o) FROM read_pieces r, unnest(r.statements) WITH ORDINALITY AS u (s, o))
    UNION ALL SELECT 'read', 101, 'bare', '{}'
    UNION ALL SELECT 'call', 1, 'pgconvo', '{}'
    UNION ALL SELECT 'call', * FROM call_pieces
    UNION ALL SELECT 'call', 100, 'everything', (SELECT array_agg(s ORDER BY c.ord, o) FROM call_pieces c, unnest(c.statements) WITH ORDINALITY AS u (s, o))
    UNION ALL SELECT 'call', 101, 'bare', '{}')
SELECT w.workload, p.ord, p.piece, p.statements
  FROM pieces p
  JOIN (VALUES ('append', 'write'), ('edit_and_resend', 'write'), ('path, never edited', 'read'), ('path, edited', 'read'),
               ('a tool call', 'call')) AS w (workload, kind)
    ON w.kind = p.kind;

-- bench.floor_round times each workload with each piece removed, p_calls
-- calls a piece, and answers every call's time. The writes go to the
-- bench's written conversations (the edit to each one's target; a tool call
-- is an assistant message of one effectful call, beside the same message in
-- text), the reads to its never-edited and edited ones; what the writes add
-- is rolled back with the piece. The pieces go in an order rotated by
-- p_round; the caller vacuums between rounds, so that no round's writes read
-- past the dead rows of the rounds before.
CREATE FUNCTION bench.floor_round(p_round int, p_calls int, p_role text, p_text jsonb)
RETURNS TABLE (workload text, piece text, us float8)
LANGUAGE plpgsql
AS $$
DECLARE
    v_n      int := (SELECT count(*) FROM bench.floor_pieces);
    v_piece  record;
    v_stmt   text;
    v_convs  uuid[];
    v_owners text[];
    v_target uuid[];
    v_k      int;
    v_t      timestamptz;
    v_rows   bigint;
    v_keys   int[] := '{}';
    v_us     float8[] := '{}';
BEGIN
    FOR v_piece IN
        SELECT f.*, row_number() OVER (ORDER BY f.workload, f.ord) AS key
          FROM bench.floor_pieces f
         ORDER BY (row_number() OVER (ORDER BY f.workload, f.ord) + p_round * 7) % v_n
    LOOP
        SELECT array_agg(p.conversation_id ORDER BY p.k), array_agg(p.owner_id ORDER BY p.k),
               array_agg(p.target_id ORDER BY p.k)
          INTO v_convs, v_owners, v_target
          FROM bench.picks p
         WHERE p.set_name = CASE v_piece.workload WHEN 'path, never edited' THEN 'linear'
                                                  WHEN 'path, edited' THEN 'edited' ELSE 'writes' END;
        BEGIN
            FOREACH v_stmt IN ARRAY v_piece.statements LOOP
                EXECUTE v_stmt;
            END LOOP;
            PERFORM set_config('role', p_role, true);
            FOR i IN 1 .. p_calls LOOP
                v_k := 1 + (i - 1) % cardinality(v_convs);
                PERFORM set_config('convo.owner_id', v_owners[v_k], true);
                v_t := clock_timestamp();
                IF v_piece.workload = 'append' AND v_piece.piece = 'bare' THEN
                    -- The bench's appendFloor.
                    WITH c AS (SELECT b.id, b.head_message_id FROM bench.conversations b WHERE b.id = v_convs[v_k] FOR NO KEY UPDATE),
                         m AS (INSERT INTO bench.messages (conversation_id, id, parent_id, role, parts)
                               SELECT c.id, gen_random_uuid(), c.head_message_id, 'user', p_text FROM c
                               RETURNING conversation_id, id),
                         h AS (UPDATE bench.conversations b SET head_message_id = m.id FROM m WHERE b.id = m.conversation_id)
                    INSERT INTO bench.head_log (conversation_id, head_message_id, previous_head_id, reason)
                    SELECT m.conversation_id, m.id, c.head_message_id, 'append' FROM m, c;
                ELSIF v_piece.workload = 'append' THEN
                    PERFORM convo.append_message(v_convs[v_k], 'user', p_text);
                ELSIF v_piece.piece = 'bare' AND v_piece.workload = 'edit_and_resend' THEN
                    -- The bench's editFloor.
                    WITH c AS (SELECT b.id, b.head_message_id FROM bench.conversations b WHERE b.id = v_convs[v_k] FOR NO KEY UPDATE),
                         o AS (SELECT b.parent_id FROM bench.messages b WHERE b.conversation_id = v_convs[v_k] AND b.id = v_target[v_k]),
                         m AS (INSERT INTO bench.messages (conversation_id, id, parent_id, role, parts)
                               SELECT c.id, gen_random_uuid(), o.parent_id, 'user', p_text FROM c, o
                               RETURNING conversation_id, id),
                         h AS (UPDATE bench.conversations b SET head_message_id = m.id FROM m WHERE b.id = m.conversation_id)
                    INSERT INTO bench.head_log (conversation_id, head_message_id, previous_head_id, reason)
                    SELECT m.conversation_id, m.id, c.head_message_id, 'user_edit' FROM m, c;
                ELSIF v_piece.workload = 'a tool call' AND v_piece.piece = 'bare' THEN
                    -- The same message in text.
                    PERFORM convo.append_message(v_convs[v_k], 'assistant', p_text);
                ELSIF v_piece.workload = 'a tool call' THEN
                    -- An effectful call of its own (a fresh id and amount:
                    -- decided execute), as an agent turn's.
                    PERFORM convo.append_message(v_convs[v_k], 'assistant', jsonb_build_array(jsonb_build_object(
                        'type', 'tool_use', 'id', 'toolu_' || replace(gen_random_uuid()::text, '-', ''),
                        'name', 'bench_purchase', 'input', jsonb_build_object(
                            'amount_minor', 1 + (random() * 1e9)::bigint, 'currency', 'EUR'))));
                ELSIF v_piece.workload = 'edit_and_resend' THEN
                    PERFORM convo.edit_and_resend(v_convs[v_k], v_target[v_k], p_text);
                ELSIF v_piece.piece = 'bare' THEN
                    -- The bench's flatRead, each row made text as it
                    -- would be sent.
                    SELECT sum(length(f::text)) INTO v_rows
                      FROM (SELECT f.seq, f.role, f.parts, f.created_at FROM bench.flat f
                             WHERE f.conversation_id = v_convs[v_k] ORDER BY f.seq) f;
                ELSIF v_piece.piece IN ('the columns beyond the flat list''s four', 'everything') THEN
                    SELECT sum(length(row(p.depth, p.role, p.parts, p.created_at)::text)) INTO v_rows
                      FROM convo.path(v_convs[v_k]) p;
                ELSE
                    SELECT sum(length(p::text)) INTO v_rows FROM convo.path(v_convs[v_k]) p;
                END IF;
                v_keys := v_keys || v_piece.key::int;
                v_us := v_us || extract(epoch FROM clock_timestamp() - v_t)::float8 * 1e6;
            END LOOP;
            RAISE EXCEPTION USING ERRCODE = 'BF001', MESSAGE = 'roll the piece back';
        EXCEPTION WHEN SQLSTATE 'BF001' THEN
            NULL;
        END;
    END LOOP;
    RETURN QUERY
    SELECT f.workload, f.piece, s.us
      FROM (SELECT f.*, row_number() OVER (ORDER BY f.workload, f.ord) AS key FROM bench.floor_pieces f) f
      JOIN unnest(v_keys, v_us) AS s (key, us) ON s.key = f.key
     ORDER BY f.workload, f.ord;
END;
$$;
