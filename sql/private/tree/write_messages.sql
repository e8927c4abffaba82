-- write_messages: the one write path of the tree. Every call that adds
-- messages writes through it (append_message, edit_and_resend and
-- regenerate, complete_generation, create_conversation, the imports), once
-- its caller has checked the owner and locked the conversation
-- (lock_conversation; p_old_head is the head it read). Everything comes in
-- as arguments, nothing through a setting or a marker:
--   the new messages as parallel arrays, parents first: each parent an
--   existing message, an earlier new one, or NULL (a root); a branch reason
--   asked for (NULL: the tree's, 'branch' for a later child); a time (NULL:
--   now); the import writing them (NULL: none), which keeps their times and
--   writes no ledger row;
--   the head to move to, why and by whom (p_head NULL: the head stays).
-- It reads each existing parent once and computes depth, sibling position
-- and branch (a first child continues its parent's branch, a later sibling
-- starts one); checks every part against its message (part_problem), each
-- tool call id unique in the conversation and each result naming a call of
-- its parent; inserts the messages and their keyed parts (keyed_parts:
-- calls, results, attachments) as sets; records each tool call's ledger
-- decision (record_tool_call); and moves the head (log_head_move: the head
-- log, the live path, the notification). The tables' triggers only guard
-- writes that do not come from pgconvo's own code. DETAILs name where a
-- refused message was going, never its own id, which is not stored.
CREATE OR REPLACE FUNCTION convo_private.write_messages(
    p_conversation_id uuid,
    p_old_head        uuid,
    p_ids             uuid[],
    p_parents         uuid[],
    p_roles           text[],
    p_parts           jsonb[],
    p_reasons         text[],
    p_times           timestamptz[],
    p_import_id       uuid,
    p_head            uuid,
    p_head_reason     text,
    p_moved_by        text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n       int := coalesce(cardinality(p_ids), 0);
    v_now     timestamptz := clock_timestamp();
    v_pidx    int[];   -- the parent's position among the new messages, 0 for none
    v_pdepth  int[];   -- an existing parent's depth
    v_pbranch uuid[];  -- an existing parent's branch
    v_sib     int[];   -- sibling position: the last under the parent, plus the rank among the new
    v_depth   int[] := '{}';
    v_branch  uuid[] := '{}';
    v_reason  text[] := '{}';
    v_missing int;     -- a new message whose parent is nowhere
    v_bad     record;
    v_keyed   boolean;
    v_calls   boolean;
    v_call    record;
BEGIN
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
                  FROM unnest(p_ids, p_parents) WITH ORDINALITY AS n (id, parent_id, i)
                  LEFT JOIN unnest(p_ids) WITH ORDINALITY AS b (id, i) ON b.id = n.parent_id AND b.i < n.i
                  LEFT JOIN convo.messages p
                         ON b.i IS NULL AND p.conversation_id = p_conversation_id AND p.id = n.parent_id) x;
        IF v_missing IS NOT NULL THEN
            PERFORM convo_private.raise_not_found('message', p_parents[v_missing]::text, p_conversation_id,
                (SELECT m.conversation_id FROM convo.messages m WHERE m.id = p_parents[v_missing] LIMIT 1));
        END IF;
        FOR i IN 1 .. v_n LOOP
            IF v_pidx[i] > 0 THEN
                v_depth[i] := v_depth[v_pidx[i]] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_branch[v_pidx[i]] ELSE p_ids[i] END;
            ELSIF p_parents[i] IS NULL THEN
                v_depth[i] := 0;
                v_branch[i] := p_ids[i];
            ELSE
                v_depth[i] := v_pdepth[i] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_pbranch[i] ELSE p_ids[i] END;
            END IF;
            v_reason[i] := CASE WHEN v_sib[i] > 1 THEN coalesce(p_reasons[i], 'branch') END;
        END LOOP;

        -- Every message and part as the contract says, the first problem by
        -- position: role, parts, then each part (part_problem), then what
        -- needs other rows: a call id once in the conversation, a result
        -- naming a call of its parent (stored, or new in the same write).
        SELECT x.* INTO v_bad FROM (
            SELECT m.i, 0 AS ordinal,
                   CASE WHEN m.role IS NULL OR m.role NOT IN ('system', 'user', 'assistant', 'tool') THEN 'CV011'
                        WHEN m.parts IS NULL THEN 'CV011'
                        WHEN jsonb_typeof(m.parts) <> 'array' OR jsonb_array_length(m.parts) = 0 THEN 'CV008'
                        WHEN octet_length(m.parts::text) > convo.max_message_bytes() THEN 'CV010'
                        WHEN m.reason IS NOT NULL AND v_sib[m.i] = 1 THEN 'CV011' END AS code,
                   CASE WHEN m.role IS NULL OR m.role NOT IN ('system', 'user', 'assistant', 'tool')
                             THEN format('unknown role %s', coalesce(quote_literal(m.role), 'NULL'))
                        WHEN m.parts IS NULL THEN 'p_parts is required'
                        WHEN jsonb_typeof(m.parts) <> 'array' THEN format('p_parts must be a JSON array, not %s', jsonb_typeof(m.parts))
                        WHEN jsonb_array_length(m.parts) = 0 THEN 'p_parts must not be empty'
                        WHEN octet_length(m.parts::text) > convo.max_message_bytes()
                             THEN format('a message is larger than %s bytes', convo.max_message_bytes())
                        ELSE 'a first child has no branch_reason' END AS message,
                   CASE WHEN octet_length(m.parts::text) > convo.max_message_bytes()
                             THEN format(': %s bytes', octet_length(m.parts::text))
                        WHEN m.reason IS NOT NULL AND v_sib[m.i] = 1 THEN format(', branch_reason %s', m.reason)
                        ELSE '' END AS detail,
                   CASE WHEN m.role IS NULL OR m.role NOT IN ('system', 'user', 'assistant', 'tool')
                        THEN 'Roles are system, user, assistant and tool.' END AS hint
              FROM unnest(p_roles, p_parts, p_reasons) WITH ORDINALITY AS m (role, parts, reason, i)
             WHERE m.role IS NULL OR m.role NOT IN ('system', 'user', 'assistant', 'tool') OR m.parts IS NULL
                OR jsonb_typeof(m.parts) <> 'array' OR jsonb_array_length(m.parts) = 0
                OR octet_length(m.parts::text) > convo.max_message_bytes()
                OR (m.reason IS NOT NULL AND v_sib[m.i] = 1)
            UNION ALL
            SELECT m.i, e.n::int, e.problem[1], e.problem[2], format(', part %s', e.n - 1) || e.problem[3],
                   nullif(e.problem[4], '')
              FROM unnest(p_roles, p_parts) WITH ORDINALITY AS m (role, parts, i)
             CROSS JOIN LATERAL (SELECT e.n, convo_private.part_problem(e.part, m.role) AS problem
                                   FROM jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)) e
             WHERE jsonb_typeof(m.parts) = 'array' AND e.problem IS NOT NULL
            UNION ALL
            SELECT c.i, c.n::int, 'CV008', format('tool call id %s is already used in this conversation', c.id),
                   format(', part %s, tool call %s', c.n - 1, c.id), NULL
              FROM (SELECT m.i, e.n, e.part ->> 'id' AS id,
                           count(*) OVER (PARTITION BY e.part ->> 'id' ORDER BY m.i, e.n) AS nth
                      FROM unnest(p_parts) WITH ORDINALITY AS m (parts, i),
                           jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                     WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use') c
             WHERE c.nth > 1
                OR EXISTS (SELECT 1 FROM convo.keyed_parts k
                            WHERE k.conversation_id = p_conversation_id AND k.type = 'tool_use' AND k.tool_call_id = c.id)
            UNION ALL
            SELECT r.i, r.n::int, 'CV008',
                   format('tool_result names tool call %s, which is not a tool_use of the parent message', r.id),
                   format(', part %s, tool call %s, parent %s', r.n - 1, r.id, coalesce(r.parent_id::text, 'none')), NULL
              FROM (SELECT m.i, e.n, e.part ->> 'tool_use_id' AS id, m.parent_id
                      FROM unnest(p_parts, p_parents) WITH ORDINALITY AS m (parts, parent_id, i),
                           jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                     WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_result') r
             WHERE NOT CASE WHEN v_pidx[r.i] > 0
                            THEN EXISTS (SELECT 1 FROM jsonb_array_elements(p_parts[v_pidx[r.i]]) u (part)
                                          WHERE u.part ->> 'type' = 'tool_use' AND u.part ->> 'id' = r.id)
                            ELSE EXISTS (SELECT 1 FROM convo.keyed_parts k
                                          WHERE k.conversation_id = p_conversation_id AND k.message_id = r.parent_id
                                            AND k.type = 'tool_use' AND k.tool_call_id = r.id) END
        ) AS x (i, ordinal, code, message, detail, hint)
        ORDER BY x.i, x.ordinal
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '%', v_bad.message
                USING ERRCODE = v_bad.code, HINT = coalesce(v_bad.hint, ''),
                      DETAIL = format('a new %s message in conversation %s, parent %s', coalesce(p_roles[v_bad.i], 'NULL'),
                                      p_conversation_id, coalesce(p_parents[v_bad.i]::text, 'none (a root)')) || v_bad.detail;
        END IF;

        INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, depth, sibling_index, branch_id,
                                    parts, created_at, import_id)
        SELECT p_conversation_id, x.id, x.parent_id, x.role, x.reason, x.depth, x.sib, x.branch, x.parts,
               coalesce(x.at, v_now), p_import_id
          FROM unnest(p_ids, p_parents, p_roles, v_reason, v_depth, v_sib, v_branch, p_parts, p_times)
               WITH ORDINALITY AS x (id, parent_id, role, reason, depth, sib, branch, parts, at, i)
         ORDER BY x.i;

        -- The parts addressed by key, one row each; the rest live only in
        -- the message's own array.
        SELECT bool_or(e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment')),
               bool_or(e.part ->> 'type' = 'tool_use')
          INTO v_keyed, v_calls
          FROM unnest(p_parts) AS m (parts), jsonb_array_elements(m.parts) AS e (part);
        IF v_keyed THEN
            INSERT INTO convo.keyed_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name)
            SELECT p_conversation_id, m.id, (e.n - 1)::int, e.part ->> 'type',
                   CASE e.part ->> 'type' WHEN 'tool_use' THEN e.part ->> 'id' WHEN 'tool_result' THEN e.part ->> 'tool_use_id' END,
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END
              FROM unnest(p_ids, p_parts) AS m (id, parts),
                   jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
             WHERE e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment');
        END IF;
        -- Each tool call's ledger decision, before any request can leave;
        -- an import's calls happened elsewhere and get none.
        IF v_calls AND p_import_id IS NULL THEN
            FOR v_call IN
                SELECT m.id, (e.n - 1)::int AS ordinal, e.part
                  FROM unnest(p_ids, p_parts) WITH ORDINALITY AS m (id, parts, i),
                       jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                 WHERE e.part ->> 'type' = 'tool_use'
                 ORDER BY m.i, e.n
            LOOP
                PERFORM convo_private.record_tool_call(p_conversation_id, v_call.id, v_call.ordinal,
                                                       v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input');
            END LOOP;
        END IF;
    END IF;

    IF p_head IS NOT NULL AND p_head IS DISTINCT FROM p_old_head THEN
        UPDATE convo.conversations c SET head_message_id = p_head WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_head_move(p_conversation_id, p_head, p_old_head, p_head_reason, p_moved_by, p_import_id);
    END IF;
END;
$$;
