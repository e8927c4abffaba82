-- write_messages: the one write path of the tree. Every call that adds
-- messages writes through it (append_message, edit_and_resend and
-- regenerate, complete_generation, create_conversation, the imports), once
-- its caller has checked the owner and locked the conversation
-- (lock_conversation; p_old_head is the head it read). Everything comes in
-- as arguments, by name, nothing through a setting or a marker:
--   the new messages (p_messages, none by default), parents first: each
--   one's id, its parent (an existing message, an earlier new one, or NULL:
--   a root), role, parts, the branch reason asked for (NULL: the tree's,
--   'branch' for a later child), time (NULL: now) and whether it is an
--   answer cut short (incomplete: a stopped or failed generation's); the import writing
--   them (NULL: none), which keeps their times and writes no ledger row
--   (and, a restore, may hold an erased attachment); the head to move to,
--   why and by whom (p_head NULL: the head stays).
-- It reads each existing parent once and computes depth, sibling position
-- and branch (a first child continues its parent's branch, a later sibling
-- starts one); checks every part against its message (part_problem), each
-- tool call id unique in the conversation and each result naming a call of
-- its parent; inserts the messages, their keyed parts (keyed_parts:
-- calls, results, attachments) and their entries in the search index
-- (index_messages) as sets; records each tool call's ledger
-- decision (record_tool_call); and moves the head, with the conversation's
-- last activity (log_head_move: the head log, the live path, the
-- notification). The tables' triggers only guard
-- writes that do not come from pgconvo's own code. DETAILs name where a
-- refused message was going, never its own id, which is not stored.
CREATE OR REPLACE FUNCTION convo_private.write_messages(
    p_conversation_id uuid,
    p_old_head        uuid,
    p_messages        convo_private.new_message[] DEFAULT '{}',
    p_import_id       uuid DEFAULT NULL,
    p_head            uuid DEFAULT NULL,
    p_head_reason     text DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Its statements are shaped by the arrays, not their values: a plan made
-- for one call serves every call (PostgreSQL would otherwise plan them anew
-- each time, at a cost above the statements').
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n       int := coalesce(cardinality(p_messages), 0);
    v_ids     uuid[];  -- the new messages' fields, each an array in their order
    v_parents uuid[];
    v_roles   text[];
    v_parts   jsonb[];
    v_reasons text[];
    v_times   timestamptz[];
    v_incomplete boolean[];
    v_now     timestamptz := clock_timestamp();
    v_pidx    int[];   -- the parent's position among the new messages, 0 for none
    v_call_keys jsonb; -- the write's tool calls, as keys "position id"
    v_pdepth  int[];   -- an existing parent's depth
    v_pbranch uuid[];  -- an existing parent's branch
    v_sib     int[];   -- sibling position: the last under the parent, plus the rank among the new
    v_depth   int[] := '{}';
    v_branch  uuid[] := '{}';
    v_reason  text[] := '{}';
    v_missing int;     -- a new message whose parent is nowhere
    v_bad_i   int;     -- the first problem: its message, its part (0: the message itself),
    v_bad_ordinal int; -- and {SQLSTATE, message, what to add to the DETAIL, hint}
    v_problem text[];
    v_link_i  int;     -- the first problem with a call id or a result's call
    v_link_ordinal int;
    v_link_problem text[];
    v_keyed   boolean; -- the write holds calls, results or attachments
    -- a restore (its record's format pgconvo) writes an erased attachment
    -- as erasure left it (its uri emptied); restore_problem checks that an
    -- erasure of the document covers it
    v_restore boolean := p_import_id IS NOT NULL
                         AND EXISTS (SELECT 1 FROM convo.imports i
                                      WHERE i.conversation_id = p_conversation_id AND i.id = p_import_id AND i.format = 'pgconvo');
    v_linked  boolean; -- calls or results
    v_calls   boolean; -- calls
    v_call    record;
BEGIN
    SELECT array_agg(m.id ORDER BY m.n), array_agg(m.parent_id ORDER BY m.n), array_agg(m.role ORDER BY m.n),
           array_agg(m.parts ORDER BY m.n), array_agg(m.branch_reason ORDER BY m.n), array_agg(m.created_at ORDER BY m.n),
           array_agg(coalesce(m.incomplete, false) ORDER BY m.n)
      INTO v_ids, v_parents, v_roles, v_parts, v_reasons, v_times, v_incomplete
      FROM unnest(p_messages) WITH ORDINALITY AS m (id, parent_id, role, parts, branch_reason, created_at, incomplete, n);
    IF v_n > 0 THEN
        -- Each parent, read once: among the new messages (an earlier one),
        -- or stored, with the last sibling position under it (one probe of
        -- messages_sibling_key in reverse; parent_id in the order keeps the
        -- index order for a root's IS NULL).
        SELECT array_agg(x.pidx ORDER BY x.i), array_agg(x.pdepth ORDER BY x.i),
               array_agg(x.pbranch ORDER BY x.i), array_agg((x.last + x.rank)::int ORDER BY x.i),
               (array_agg(x.i ORDER BY x.i) FILTER (WHERE x.missing))[1]
          INTO v_pidx, v_pdepth, v_pbranch, v_sib, v_missing
          FROM (SELECT n.i, coalesce(b.i, 0)::int AS pidx, p.depth AS pdepth, p.branch_id AS pbranch,
                       n.parent_id IS NOT NULL AND b.i IS NULL AND p.id IS NULL AS missing,
                       CASE WHEN b.i IS NOT NULL THEN 0
                            WHEN n.parent_id IS NULL THEN
                                 coalesce((SELECT s.sibling_index FROM convo.messages s
                                            WHERE s.conversation_id = p_conversation_id AND s.parent_id IS NULL
                                            ORDER BY s.parent_id DESC, s.sibling_index DESC LIMIT 1), 0)
                            ELSE coalesce((SELECT s.sibling_index FROM convo.messages s
                                            WHERE s.conversation_id = p_conversation_id AND s.parent_id = n.parent_id
                                            ORDER BY s.sibling_index DESC LIMIT 1), 0) END AS last,
                       row_number() OVER (PARTITION BY n.parent_id ORDER BY n.i) AS rank
                  FROM unnest(v_ids, v_parents) WITH ORDINALITY AS n (id, parent_id, i)
                  LEFT JOIN unnest(v_ids) WITH ORDINALITY AS b (id, i) ON b.id = n.parent_id AND b.i < n.i
                  -- A key lookup whatever the plan: a generic plan made on
                  -- a conversation's first messages joined every message of
                  -- the conversation by hash, at every write of the session.
                  LEFT JOIN LATERAL (SELECT p.id, p.depth, p.branch_id FROM convo.messages p
                                      WHERE b.i IS NULL AND p.conversation_id = p_conversation_id AND p.id = n.parent_id
                                      LIMIT 1) p ON true) x;
        IF v_missing IS NOT NULL THEN
            PERFORM convo_private.raise_not_found('message', v_parents[v_missing]::text, p_conversation_id,
                convo_private.other_conversation(p_conversation_id, 'convo.messages', 'id', v_parents[v_missing]::text));
        END IF;
        FOR i IN 1 .. v_n LOOP
            IF v_pidx[i] > 0 THEN
                v_depth[i] := v_depth[v_pidx[i]] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_branch[v_pidx[i]] ELSE v_ids[i] END;
            ELSIF v_parents[i] IS NULL THEN
                v_depth[i] := 0;
                v_branch[i] := v_ids[i];
            ELSE
                v_depth[i] := v_pdepth[i] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_pbranch[i] ELSE v_ids[i] END;
            END IF;
            v_reason[i] := CASE WHEN v_sib[i] > 1 THEN coalesce(v_reasons[i], 'branch') END;
        END LOOP;

        -- Every message and part as the contract says, the first problem by
        -- position (role and parts, then each part: part_problem), and
        -- whether the write holds parts addressed by key, in one pass over
        -- the parts.
        SELECT x.i, x.ordinal, x.problem,
               bool_or(x.type IN ('tool_use', 'tool_result', 'attachment')) OVER (),
               bool_or(x.type IN ('tool_use', 'tool_result')) OVER (),
               bool_or(x.type = 'tool_use') OVER ()
          INTO v_bad_i, v_bad_ordinal, v_problem, v_keyed, v_linked, v_calls
          FROM (SELECT m.i, 0 AS ordinal, NULL::text AS type,
                       CASE WHEN m.role IS NULL OR m.role NOT IN ('system', 'user', 'assistant', 'tool')
                                 THEN ARRAY['CV011', format('unknown role %s', coalesce(quote_literal(m.role), 'NULL')), '',
                                            'Roles are system, user, assistant and tool.']
                            WHEN m.parts IS NULL THEN ARRAY['CV011', 'p_parts is required', '', '']
                            WHEN jsonb_typeof(m.parts) <> 'array'
                                 THEN ARRAY['CV008', format('p_parts must be a JSON array, not %s', jsonb_typeof(m.parts)), '', '']
                            WHEN jsonb_array_length(m.parts) = 0 THEN ARRAY['CV008', 'p_parts must not be empty', '', '']
                            WHEN octet_length(m.parts::text) > convo.max_message_bytes()
                                 THEN ARRAY['CV010', format('a message is larger than %s bytes', convo.max_message_bytes()),
                                            format(': %s bytes', octet_length(m.parts::text)), '']
                            WHEN m.reason IS NOT NULL AND v_sib[m.i] = 1
                                 THEN ARRAY['CV011', 'a first child has no branch_reason', format(', branch_reason %s', m.reason), '']
                       END AS problem
                  FROM unnest(v_roles, v_parts, v_reasons) WITH ORDINALITY AS m (role, parts, reason, i)
                UNION ALL
                SELECT m.i, e.n::int, e.part ->> 'type',
                       CASE WHEN v_restore AND e.part ->> 'type' = 'attachment' AND e.part = convo_private.redact_part(e.part)
                                 AND jsonb_typeof(e.part -> 'media_type') = 'string' AND e.part ->> 'media_type' <> ''
                            THEN NULL ELSE convo_private.part_problem(e.part, m.role) END
                  FROM unnest(v_roles, v_parts) WITH ORDINALITY AS m (role, parts, i),
                       jsonb_array_elements(CASE WHEN jsonb_typeof(m.parts) = 'array' THEN m.parts ELSE '[]' END)
                           WITH ORDINALITY AS e (part, n)) x
         ORDER BY x.problem IS NULL, x.i, x.ordinal
         LIMIT 1;
        -- What needs other rows, only for a write with calls or results: a
        -- call id once in the conversation, a result naming a call of its
        -- parent (stored, or new in the same write). The earlier problem wins.
        IF v_linked THEN
            -- The write's own calls, by message position and id.
            SELECT jsonb_object_agg(m.i || ' ' || (e.part ->> 'id'), true) INTO v_call_keys
              FROM unnest(v_parts) WITH ORDINALITY AS m (parts, i),
                   jsonb_array_elements(m.parts) AS e (part)
             WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use' AND e.part ->> 'id' IS NOT NULL;
            SELECT x.i, x.ordinal, x.problem INTO v_link_i, v_link_ordinal, v_link_problem FROM (
                SELECT c.i, c.n::int AS ordinal,
                       ARRAY['CV008', format('tool call id %s is already used in this conversation', c.id),
                             format(', tool call %s', c.id), ''] AS problem
                  FROM (SELECT m.i, e.n, e.part ->> 'id' AS id,
                               count(*) OVER (PARTITION BY e.part ->> 'id' ORDER BY m.i, e.n) AS nth
                          FROM unnest(v_parts) WITH ORDINALITY AS m (parts, i),
                               jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                         WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use') c
                 WHERE c.nth > 1
                    OR EXISTS (SELECT 1 FROM convo.keyed_parts k
                                WHERE k.conversation_id = p_conversation_id AND k.type = 'tool_use' AND k.tool_call_id = c.id)
                UNION ALL
                -- A result's call: among its parent's calls in this write (one
                -- lookup in v_call_keys, so a tree of many calls and results costs
                -- linear), else among its stored ones.
                SELECT r.i, r.n::int,
                       ARRAY['CV008', format('tool_result names tool call %s, which is not a tool_use of the parent message', r.id),
                             format(', tool call %s, parent %s', r.id, coalesce(r.parent_id::text, 'none')), '']
                  FROM (SELECT m.i, e.n, e.part ->> 'tool_use_id' AS id, m.parent_id
                          FROM unnest(v_parts, v_parents) WITH ORDINALITY AS m (parts, parent_id, i),
                               jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                         WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_result') r
                 WHERE NOT CASE WHEN v_pidx[r.i] > 0
                                THEN coalesce(v_call_keys ? (v_pidx[r.i] || ' ' || r.id), false)
                                ELSE EXISTS (SELECT 1 FROM convo.keyed_parts k
                                              WHERE k.conversation_id = p_conversation_id AND k.message_id = r.parent_id
                                                AND k.type = 'tool_use' AND k.tool_call_id = r.id) END
            ) AS x (i, ordinal, problem)
            ORDER BY x.i, x.ordinal
            LIMIT 1;
            IF v_link_problem IS NOT NULL
               AND (v_problem IS NULL OR (v_link_i, v_link_ordinal) < (v_bad_i, v_bad_ordinal)) THEN
                v_bad_i := v_link_i;
                v_bad_ordinal := v_link_ordinal;
                v_problem := v_link_problem;
            END IF;
        END IF;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION '%', v_problem[2]
                USING ERRCODE = v_problem[1], HINT = v_problem[4],
                      DETAIL = format('a new %s message in conversation %s, parent %s', coalesce(v_roles[v_bad_i], 'NULL'),
                                      p_conversation_id, coalesce(v_parents[v_bad_i]::text, 'none (a root)'))
                               || CASE WHEN v_bad_ordinal > 0 THEN format(', part %s', v_bad_ordinal - 1) ELSE '' END
                               || v_problem[3];
        END IF;

        INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, depth, sibling_index, branch_id,
                                    parts, created_at, import_id, incomplete)
        SELECT p_conversation_id, x.id, x.parent_id, x.role, x.reason, x.depth, x.sib, x.branch, x.parts,
               coalesce(x.at, v_now), p_import_id, x.incomplete
          FROM unnest(v_ids, v_parents, v_roles, v_reason, v_depth, v_sib, v_branch, v_parts, v_times, v_incomplete)
               WITH ORDINALITY AS x (id, parent_id, role, reason, depth, sib, branch, parts, at, incomplete, i)
         ORDER BY x.i;
        -- Their text in the search index (search_conversations).
        PERFORM convo_private.index_messages(p_conversation_id, v_ids, v_parts);

        -- The parts addressed by key, one row each; the rest live only in
        -- the message's own array.
        IF v_keyed THEN
            INSERT INTO convo.keyed_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name)
            SELECT p_conversation_id, m.id, (e.n - 1)::int, e.part ->> 'type',
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'id'
                        WHEN e.part ->> 'type' = 'tool_result' THEN e.part ->> 'tool_use_id' END,
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END
              FROM unnest(v_ids, v_parts) AS m (id, parts),
                   jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
             WHERE e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment');
        END IF;
        -- Each tool call's ledger decision, before any request can leave;
        -- an import's calls happened elsewhere and get none.
        IF v_calls AND p_import_id IS NULL THEN
            FOR v_call IN
                SELECT m.id, (e.n - 1)::int AS ordinal, e.part, m.branch, m.depth
                  FROM unnest(v_ids, v_parts, v_branch, v_depth) WITH ORDINALITY AS m (id, parts, branch, depth, i),
                       jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                 WHERE e.part ->> 'type' = 'tool_use'
                 ORDER BY m.i, e.n
            LOOP
                -- A message's first calls on this function's generic plans;
                -- from its eighth part on, each planned afresh against the
                -- ledger the earlier ones grew (record_tool_call_planned).
                IF v_call.ordinal < 7 THEN
                    PERFORM convo_private.record_tool_call(p_conversation_id, v_call.id, v_call.ordinal,
                                                           v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input',
                                                           v_call.branch, v_call.depth);
                ELSE
                    PERFORM convo_private.record_tool_call_planned(p_conversation_id, v_call.id, v_call.ordinal,
                                                                   v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input',
                                                                   v_call.branch, v_call.depth);
                END IF;
            END LOOP;
        END IF;
    END IF;

    IF p_head IS NOT NULL AND p_head IS DISTINCT FROM p_old_head THEN
        -- The conversation's last activity moves with its head: now, or for
        -- an import the latest original time it writes.
        UPDATE convo.conversations c
           SET head_message_id = p_head,
               last_activity_at = CASE WHEN p_import_id IS NULL OR v_times IS NULL THEN v_now
                                       ELSE coalesce((SELECT max(t) FROM unnest(v_times) AS t), v_now) END
         WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_head_move(p_conversation_id, p_head, p_old_head, p_head_reason, p_moved_by, p_import_id);
    END IF;
END;
$$;
