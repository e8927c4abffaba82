-- restore_problem: the first reason, naming the key and the row, why an
-- export document is not a history this database could have written, or
-- NULL. import_conversation refuses the document with it (CV011) before
-- writing anything; what needs the stored tree (the ledger's decisions,
-- links and amounts) is ledger_problems', after. In one pass each:
--   references: every id the document names is in it, and the chains hold
--   (parents, depths, the head log ending at the head, effects' events from
--   'requested' to their state, each effect created by one call, a
--   rejected one's a rejection); an
--   origin's format has an import in the document's record of imports;
--   numbers: a head-log, change or event seq is there and appears once
--   (import_conversation renumbers them, keeping their order);
--   reasons: the head log's are the API's ('direct_update' is never
--   restored; 'create' only begins a log, 'import' begins one with an
--   import from another product in the document, or is a later merge that
--   names one of its imports; a message from another product is only in a
--   log begun by 'import');
--   keys: an effect's idempotency key is its scope key, the re-run key of
--   its confirmation, or (sent before digests were keyed) a plain digest of
--   its scope;
--   generations: a generation's message is an assistant answer to its
--   prompt, incomplete when it was cancelled or failed and only then, one
--   generation's only, and an incomplete message is such a generation's
--   (the generations guard's rule for a direct write);
--   times: each is there and finite; in order: nothing after p_now or
--   before the conversation, the last activity not before it, a head
--   move not before its message, events of an effect in order and not
--   before it, an effect not before its call nor confirmed, settled or
--   compensated before it was requested, a call not before its
--   message, a generation not before its prompt nor ending before it began;
--   a message not before its parent unless it came from another product
--   (an origin), whose times are the source's, but not after the import of
--   its format nor the one it names; an 'import' head move to such a message;
--   erasures: one is restored only where every copy of the content from
--   before it is redacted (the earliest unredacted row of each kind against
--   the first erasure after it: linear), each place is one erasure writes,
--   and no count is more than the rows there; an erased attachment is
--   under an erasure;
--   imports: the document's records are of this owner, of a known format,
--   and not after p_now;
--   changes: the change log (title, archive state) is a chain from none to
--   what the conversation holds, in time order, its titles redacted by an
--   erasure after them.
CREATE OR REPLACE FUNCTION convo_private.restore_problem(p_owner_id text, p_export jsonb, p_now timestamptz)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_conv    jsonb := p_export -> 'conversation';
    v_created timestamptz := (p_export -> 'conversation' ->> 'created_at')::timestamptz;
    v_problem text;
BEGIN
    WITH m AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages')),
         l AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.conversation_head_log, p_export -> 'head_log')),
         g AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.generations, p_export -> 'generations')),
         k AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effect_calls, p_export -> 'tool_calls')),
         e AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effects, p_export -> 'effects')),
         v AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events')),
         t AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.tools, p_export -> 'tools')),
         o AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins')),
         r AS (SELECT x.*, j.elem -> 'places' AS places
                 FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
                      LATERAL jsonb_populate_record(NULL::convo.erasures, j.elem) x),
         i AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.imports, p_export -> 'imports')),
         ch AS (SELECT * FROM jsonb_populate_recordset(NULL::convo.conversation_changes, p_export -> 'changes')),
         -- Messages that came from another product keep the source's times
         -- (but none after the import of their format): their origin's
         -- format and the latest import of it in the document, and the
         -- import the message names (a merge's messages are its own, not
         -- the first import's).
         io AS (SELECT i.format, max(i.imported_at) AS imported_at FROM i GROUP BY i.format),
         mo AS (SELECT m.*, x.source, x.message_id IS NOT NULL AS imported, io.imported_at AS source_imported_at,
                       mi.imported_at AS own_imported_at
                  FROM m
                  LEFT JOIN (SELECT DISTINCT ON (o.message_id) o.message_id, o.source FROM o ORDER BY o.message_id) x
                    ON x.message_id = m.id
                  LEFT JOIN io ON io.format = x.source
                  LEFT JOIN i mi ON mi.id = m.import_id),
         -- How many rows of each place the document holds, for erasure counts.
         counts (place, n) AS (VALUES
             ('messages', (SELECT count(*) FROM m)),
             ('message_parts', (SELECT coalesce(sum(jsonb_array_length(m.parts)), 0) FROM m)),
             ('conversations', 1),
             ('generations', (SELECT count(*) FROM g)),
             ('tool_effects', (SELECT count(*) FROM e)),
             ('tool_effect_events', (SELECT count(*) FROM v)),
             ('import_origins', (SELECT count(*) FROM o)),
             ('imports', (SELECT count(*) FROM i)),
             ('conversation_changes', (SELECT count(*) FROM ch)))
    SELECT p INTO v_problem FROM (
        -- Numbers: each row of a numbered log has its seq (its order).
        (SELECT format('%s: row %s of the array has no seq', x.key, x.n)
           FROM (SELECT k.key, j.n FROM unnest(ARRAY['head_log', 'changes', 'effect_events']) k (key),
                        jsonb_array_elements(p_export -> k.key) WITH ORDINALITY j (elem, n)
                  WHERE jsonb_typeof(j.elem -> 'seq') IS DISTINCT FROM 'number') x LIMIT 1)
        UNION ALL
        -- References.
        (SELECT format('messages: message %s appears twice', m.id) FROM m GROUP BY m.id HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        -- Each row of the other keys once, by its key, named before an
        -- insert would fail on it.
        (SELECT format('%s: %s appears twice', x.key, x.name)
           FROM (SELECT 'generations' AS key, 'generation ' || g.id AS name FROM g
                 UNION ALL SELECT 'tool_calls', 'call ' || k.tool_call_id FROM k
                 UNION ALL SELECT 'effects', 'effect ' || e.id FROM e
                 UNION ALL SELECT 'erasures', 'erasure ' || r.id FROM r
                 UNION ALL SELECT 'imports', 'import ' || i.id FROM i
                 UNION ALL SELECT 'tools', format('tool %s version %s', t.name, t.version) FROM t) x
          GROUP BY x.key, x.name HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        -- A parent missing, else a depth that is not its parent's plus one:
        -- one join of every message with its parent (ordered, so it is a
        -- hash join and not a scan of the messages for each message).
        (SELECT CASE WHEN x.orphan
                     THEN format('messages: message %s has parent %s, which is not in the export', x.id, x.parent_id)
                     ELSE format('messages: message %s has depth %s under parent %s of depth %s', x.id, x.depth, x.parent_id, x.pdepth) END
           FROM (SELECT c.id, c.parent_id, c.depth, p.depth AS pdepth, c.parent_id IS NOT NULL AND p.id IS NULL AS orphan
                   FROM m c LEFT JOIN m p ON p.id = c.parent_id
                  WHERE (c.parent_id IS NOT NULL AND p.id IS NULL)
                     OR c.depth IS DISTINCT FROM CASE WHEN c.parent_id IS NULL THEN 0 ELSE p.depth + 1 END) x
          ORDER BY x.orphan DESC
          LIMIT 1)
        UNION ALL
        -- Siblings numbered from 1 in order, a branch reason on every one
        -- but the first (write_messages places them so), named here by id.
        (SELECT format('messages: message %s has sibling_index %s and branch_reason %s, its place among its siblings is %s', x.id,
                       coalesce(x.sibling_index::text, 'none'), coalesce(x.branch_reason, 'none'), x.place)
           FROM (SELECT m.id, m.sibling_index, m.branch_reason,
                        row_number() OVER (PARTITION BY m.parent_id ORDER BY m.sibling_index) AS place FROM m) x
          WHERE x.sibling_index IS DISTINCT FROM x.place OR (x.place = 1) <> (x.branch_reason IS NULL) LIMIT 1)
        UNION ALL
        (SELECT format('conversation: head %s is not in the tree', v_conv ->> 'head_message_id')
          WHERE v_conv ->> 'head_message_id' IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM m WHERE m.id::text = v_conv ->> 'head_message_id'))
        UNION ALL
        (SELECT format('head_log: row seq %s names message %s, which is not in the export', l.seq, coalesce(l.head_message_id, l.previous_head_id))
           FROM l WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = l.head_message_id)
                     OR (l.previous_head_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = l.previous_head_id)) LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s appears twice', l.seq) FROM l GROUP BY l.seq HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s starts at %s, not where the row before ended (%s)', x.seq,
                       coalesce(x.previous_head_id::text, 'none'), coalesce(x.before::text, 'none'))
           FROM (SELECT l.seq, l.previous_head_id, lag(l.head_message_id) OVER (ORDER BY l.seq) AS before FROM l) x
          WHERE x.previous_head_id IS DISTINCT FROM x.before LIMIT 1)
        UNION ALL
        (SELECT format('head_log: the log ends at %s, the head is %s', coalesce(x.head_message_id::text, 'none'),
                       coalesce(v_conv ->> 'head_message_id', 'none'))
           FROM (SELECT (SELECT l.head_message_id FROM l ORDER BY l.seq DESC LIMIT 1) AS head_message_id) x
          WHERE x.head_message_id::text IS DISTINCT FROM v_conv ->> 'head_message_id')
        UNION ALL
        (SELECT format('generations: generation %s names message %s, which is not in the export', g.id,
                       coalesce(g.prompt_message_id, g.head_at_begin, g.message_id))
           FROM g WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.prompt_message_id)
                     OR (g.head_at_begin IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.head_at_begin))
                     OR (g.message_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = g.message_id)) LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s names message %s, which is not in the export', k.tool_call_id, coalesce(k.message_id, k.fork_point_id))
           FROM k WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = k.message_id)
                     OR (k.fork_point_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM m WHERE m.id = k.fork_point_id)) LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s names effect %s, which is not in the export', k.tool_call_id, k.effect_id)
           FROM k WHERE k.effect_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM e WHERE e.id = k.effect_id) LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s names tool %s version %s, which is not in the export', k.tool_call_id, k.tool_name, k.tool_version)
           FROM k WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.name = k.tool_name AND t.version = k.tool_version) LIMIT 1)
        UNION ALL
        -- A call's place is a branch and a depth, or neither (a call a
        -- distributed database's upgrade could not place).
        (SELECT format('tool_calls: call %s has a %s without a %s', k.tool_call_id,
                       CASE WHEN k.branch_id IS NULL THEN 'depth' ELSE 'branch_id' END,
                       CASE WHEN k.branch_id IS NULL THEN 'branch_id' ELSE 'depth' END)
           FROM k WHERE (k.branch_id IS NULL) <> (k.depth IS NULL) LIMIT 1)
        UNION ALL
        -- A call links the tool_use part of its message at its ordinal (its
        -- id, and its effect's tool), as self_check's effects_linked requires;
        -- an ordinal counts from 0 (jsonb's -> would count a negative one
        -- from the end).
        (SELECT format('tool_calls: call %s links part %s of message %s, which is not its tool_use', k.tool_call_id, k.ordinal, k.message_id)
           FROM k JOIN m ON m.id = k.message_id
           LEFT JOIN e ON e.id = k.effect_id
          WHERE k.ordinal IS NULL OR k.ordinal < 0
             OR (CASE WHEN jsonb_typeof(m.parts) = 'array' THEN m.parts -> k.ordinal END) ->> 'type' IS DISTINCT FROM 'tool_use'
             OR m.parts -> k.ordinal ->> 'id' IS DISTINCT FROM k.tool_call_id
             OR (e.id IS NOT NULL AND m.parts -> k.ordinal ->> 'name' IS DISTINCT FROM e.tool_name) LIMIT 1)
        UNION ALL
        -- Every effect was created by exactly one call (execute, confirm or
        -- rejected), as self_check's effects_linked requires.
        (SELECT format('effects: effect %s has %s creating calls in the export, not one', x.id, x.n)
           FROM (SELECT e.id, count(k.tool_call_id) AS n
                   FROM e LEFT JOIN k ON k.effect_id = e.id AND k.decision IS DISTINCT FROM 'reuse'
                  GROUP BY e.id) x
          WHERE x.n <> 1 LIMIT 1)
        UNION ALL
        -- A rejected call made a failed effect that repeats none and was
        -- never confirmed (record_tool_call); a confirmation on it would
        -- meet a CHECK of tool_effects, naming no row. (How the other
        -- decisions began is ledger_problems', after.)
        (SELECT format('tool_calls: call %s decided rejected, but its effect %s is no rejection (a failed effect, repeating none, never confirmed)',
                       k.tool_call_id, e.id)
           FROM k JOIN e ON e.id = k.effect_id
          WHERE k.decision = 'rejected'
            AND (e.state IS DISTINCT FROM 'failed' OR e.repeats_effect_id IS NOT NULL OR e.confirmed_by IS NOT NULL) LIMIT 1)        UNION ALL
        (SELECT format('effects: effect %s repeats effect %s, which is not in the export', e.id, e.repeats_effect_id)
           FROM e WHERE e.repeats_effect_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM e r WHERE r.id = e.repeats_effect_id) LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s names tool %s version %s, which is not in the export', e.id, e.tool_name, e.tool_version)
           FROM e WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.name = e.tool_name AND t.version = e.tool_version) LIMIT 1)
        UNION ALL
        (SELECT format('erasures: erasure %s names owner %s', r.id, r.owner_id) FROM r WHERE r.owner_id IS DISTINCT FROM p_owner_id LIMIT 1)
        UNION ALL
        (SELECT format('origins: the origin of message %s names no message of the export', o.message_id)
           FROM o WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.id = o.message_id) LIMIT 1)
        UNION ALL
        (SELECT format('origins: message %s has two origins', o.message_id) FROM o GROUP BY o.message_id HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        -- An origin is written by an import of its format, which the
        -- document's record of imports holds.
        (SELECT format('origins: the origin of message %s is of format %s, and the export has no import of format %s',
                       o.message_id, coalesce(o.source, 'none'), coalesce(o.source, 'none'))
           FROM o WHERE o.source IS NULL OR o.source = 'pgconvo' OR NOT EXISTS (SELECT 1 FROM io WHERE io.format = o.source) LIMIT 1)
        UNION ALL
        -- And the message it is the origin of was written by that import
        -- (its import_id names it), or carried by a restore that names it.
        (SELECT format('origins: the origin of message %s is of format %s, but the message names import %s, not one of that format',
                       m.id, m.source, coalesce(m.import_id::text, 'none'))
           FROM mo m LEFT JOIN i ON i.id = m.import_id
          WHERE m.imported AND (i.id IS NULL OR i.format NOT IN (m.source, 'pgconvo')) LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s names effect %s, which is not in the export', v.seq, v.effect_id)
           FROM v WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.id = v.effect_id) LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s appears twice', v.seq) FROM v GROUP BY v.seq HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s of effect %s goes from %s, not from %s', x.seq, x.effect_id, x.from_state, x.before)
           FROM (SELECT v.seq, v.effect_id, v.from_state,
                        coalesce(lag(v.to_state) OVER (PARTITION BY v.effect_id ORDER BY v.seq), 'requested') AS before FROM v) x
          WHERE x.from_state IS DISTINCT FROM x.before LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s is %s, its last event says %s', e.id, e.state, coalesce(x.to_state, 'nothing'))
           FROM e LEFT JOIN (SELECT DISTINCT ON (v.effect_id) v.effect_id, v.to_state FROM v ORDER BY v.effect_id, v.seq DESC) x
             ON x.effect_id = e.id
          WHERE x.to_state IS DISTINCT FROM e.state LIMIT 1)
        UNION ALL
        -- Reasons.
        (SELECT format('head_log: row seq %s has reason %s, which only the database writes for a change outside the API', l.seq, l.reason)
           FROM l WHERE l.reason = 'direct_update' ORDER BY l.seq LIMIT 1)
        UNION ALL
        -- (A later 'import' is a merge of the same source, which names its
        -- import: one of the document's records, or the restore that carried
        -- it.)
        (SELECT format('head_log: row seq %s has reason %s, which only begins a head log%s', x.seq, x.reason,
                       CASE WHEN x.reason = 'import' THEN ' or names an import of the export' ELSE '' END)
           FROM (SELECT l.seq, l.reason, l.import_id, row_number() OVER (ORDER BY l.seq) AS n FROM l) x
          WHERE x.n > 1 AND (x.reason = 'create'
                             OR (x.reason = 'import' AND NOT EXISTS (SELECT 1 FROM i WHERE i.id = x.import_id)))
          ORDER BY x.seq LIMIT 1)
        UNION ALL
        -- An import (or a merge) moves the head only to a message from
        -- another product, never to one the API wrote.
        (SELECT format('head_log: row seq %s has reason import, and its head %s came from no import', l.seq, l.head_message_id)
           FROM l JOIN mo m ON m.id = l.head_message_id WHERE l.reason = 'import' AND NOT m.imported ORDER BY l.seq LIMIT 1)
        UNION ALL
        -- A log begun by an import is begun by one of the document's
        -- imports from another product (as an origin is written by one).
        (SELECT format('head_log: row seq %s has reason import, and the export has no import from another product', x.seq)
           FROM (SELECT l.seq, l.reason FROM l ORDER BY l.seq LIMIT 1) x
          WHERE x.reason = 'import' AND NOT EXISTS (SELECT 1 FROM io WHERE io.format IN ('chatgpt', 'openwebui', 'librechat')))
        UNION ALL
        -- Keys.
        (SELECT format('effects: effect %s has idempotency key %s, which is neither its scope key nor its re-run''s key', e.id, e.idempotency_key)
           FROM e
          WHERE e.idempotency_key IS DISTINCT FROM CASE WHEN e.confirmed_by IS NULL THEN e.scope_key
                                                        ELSE 'rerun:' || e.id || ':of:' || e.repeats_effect_id END
            -- A key sent before digests were keyed keeps its plain form: a
            -- digest under the same scope. The scopes are the API's, never a
            -- pattern read from the document.
            AND NOT (e.confirmed_by IS NULL AND e.state <> 'awaiting_confirmation'
                     AND e.idempotency_key ~ '^(tool_call|conversation_args|fork_args|rejected):[0-9a-f]{64}$'
                     -- (An erased effect restored before is keyed 'erased:' and
                     -- its id, and keeps the key it was sent under.)
                     AND split_part(e.scope_key, ':', 1) IN (split_part(e.idempotency_key, ':', 1), 'erased'))
          LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s has scope key %s, which is no scope''s key', e.id, e.scope_key)
           FROM e WHERE e.scope_key !~ '^(tool_call|conversation_args|fork_args|rejected):[0-9a-f]{64}$'
                    AND e.scope_key !~ '^erased:[0-9a-f-]{36}$' LIMIT 1)
        UNION ALL
        -- A confirmation's event is by whoever confirmed it (confirm_effect
        -- writes the one name to both), and someone did.
        (SELECT format('effect_events: effect %s was confirmed by %s, its event seq %s says %s', e.id,
                       coalesce(nullif(e.confirmed_by, ''), 'nobody'), v.seq, coalesce(v.actor, 'nobody'))
           FROM e JOIN v ON v.effect_id = e.id AND v.from_state = 'awaiting_confirmation' AND v.to_state = 'pending'
          WHERE e.confirmed_by IS NULL OR e.confirmed_by = '' OR v.actor IS DISTINCT FROM e.confirmed_by LIMIT 1)
        UNION ALL
        -- Times: each one the database writes is there and finite (a
        -- column that may be NULL is finite when set), then in order.
        (SELECT format('%s: %s%s %s, not a finite time', x.key, x.row_name, x.col, coalesce(x.at::text, 'none'))
           FROM (SELECT 'conversation' AS key, '' AS row_name, 'created_at' AS col, v_created AS at, true AS required
                 UNION ALL
                 SELECT 'conversation', '', 'last_activity_at', (v_conv ->> 'last_activity_at')::timestamptz, true
                 UNION ALL
                 SELECT 'messages', format('message %s ', m.id), 'created_at', m.created_at, true FROM m
                 UNION ALL
                 SELECT 'head_log', format('row seq %s ', l.seq), 'moved_at', l.moved_at, true FROM l
                 UNION ALL
                 SELECT 'changes', format('row seq %s ', ch.seq), 'changed_at', ch.changed_at, true FROM ch
                 UNION ALL
                 SELECT 'generations', format('generation %s ', g.id), c.col, c.at, c.required
                   FROM g, LATERAL (VALUES ('started_at', g.started_at, true), ('finished_at', g.finished_at, false)) c (col, at, required)
                 UNION ALL
                 SELECT 'tool_calls', format('call %s ', k.tool_call_id), 'decided_at', k.decided_at, true FROM k
                 UNION ALL
                 SELECT 'effects', format('effect %s ', e.id), c.col, c.at, c.required
                   FROM e, LATERAL (VALUES ('requested_at', e.requested_at, true), ('deadline_at', e.deadline_at, true),
                                           ('confirmed_at', e.confirmed_at, false), ('settled_at', e.settled_at, false),
                                           ('compensated_at', e.compensated_at, false)) c (col, at, required)
                 UNION ALL
                 SELECT 'effect_events', format('event seq %s ', v.seq), 'at', v.at, true FROM v
                 UNION ALL
                 SELECT 'erasures', format('erasure %s ', r.id), 'erased_at', r.erased_at, true FROM r
                 UNION ALL
                 SELECT 'imports', format('import %s ', i.id), 'imported_at', i.imported_at, true FROM i) x
          WHERE (x.at IS NULL AND x.required) OR NOT isfinite(x.at) LIMIT 1)
        UNION ALL
        (SELECT format('conversation: created_at %s is after the import', v_created) WHERE v_created > p_now)
        UNION ALL
        (SELECT format('conversation: last activity at %s, before the conversation (%s)', v_conv ->> 'last_activity_at', v_created)
          WHERE (v_conv ->> 'last_activity_at')::timestamptz < v_created)
        UNION ALL
        -- A message from another product may be older than the conversation
        -- or its parent (the source's times), but none is after the import.
        (SELECT format('messages: message %s created at %s, %s', m.id, m.created_at,
                       CASE WHEN m.created_at > p_now OR m.imported THEN 'after the import' ELSE 'before the conversation' END)
           FROM mo m
          WHERE m.created_at > p_now OR (NOT m.imported AND m.created_at < v_created)
             OR (m.imported AND (m.created_at > m.source_imported_at OR m.created_at > m.own_imported_at)) LIMIT 1)
        UNION ALL
        (SELECT format('messages: message %s created at %s, before its parent %s (%s)', c.id, c.created_at, p.id, p.created_at)
           FROM mo c JOIN mo p ON p.id = c.parent_id
          WHERE NOT c.imported AND NOT p.imported AND c.created_at < p.created_at LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s moved at %s, %s', l.seq, l.moved_at,
                       CASE WHEN l.moved_at > p_now THEN 'after the import' ELSE 'before the conversation' END)
           FROM l WHERE l.moved_at > p_now OR l.moved_at < v_created ORDER BY l.seq LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s moved at %s, before the row before it', x.seq, x.moved_at)
           FROM (SELECT l.seq, l.moved_at, lag(l.moved_at) OVER (ORDER BY l.seq) AS before FROM l) x
          WHERE x.moved_at < x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        (SELECT format('head_log: row seq %s moved at %s to message %s, created later (%s)', l.seq, l.moved_at, m.id, m.created_at)
           FROM l JOIN mo m ON m.id = l.head_message_id WHERE NOT m.imported AND l.moved_at < m.created_at ORDER BY l.seq LIMIT 1)
        UNION ALL
        -- A generation's message is an assistant answer to its prompt,
        -- incomplete when the generation was cancelled or failed and only
        -- then, as the generations guard requires of a direct write; an
        -- incomplete message is such a generation's.
        (SELECT format('generations: generation %s is %s by message %s, not an assistant answer to its prompt %s%s',
                       g.id, g.state, g.message_id, g.prompt_message_id,
                       CASE WHEN g.state = 'completed' THEN '' ELSE ' marked incomplete' END)
           FROM g LEFT JOIN m ON m.id = g.message_id
          WHERE g.message_id IS NOT NULL
            AND (m.id IS NULL OR m.parent_id IS DISTINCT FROM g.prompt_message_id OR m.role IS DISTINCT FROM 'assistant'
                 OR coalesce(m.incomplete, false) IS DISTINCT FROM (g.state <> 'completed')) LIMIT 1)
        UNION ALL
        (SELECT format('generations: message %s answers %s generations, not one', g.message_id, count(*))
           FROM g WHERE g.message_id IS NOT NULL GROUP BY g.message_id HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('messages: message %s is marked incomplete, and no cancelled or failed generation answered with it', m.id)
           FROM m WHERE m.incomplete AND NOT EXISTS (SELECT 1 FROM g WHERE g.message_id = m.id AND g.state IN ('cancelled', 'failed'))
          LIMIT 1)
        UNION ALL
        -- A completed generation began before its answer was written and
        -- finished after; the head it began at was there when it began.
        (SELECT format('generations: generation %s %s', g.id, CASE
                    WHEN a.created_at < g.started_at THEN format('is answered by message %s, created before it started', a.id)
                    WHEN a.created_at > g.finished_at THEN format('is answered by message %s, created after it finished', a.id)
                    ELSE format('began at head %s, created after it started', h.id) END)
           FROM g LEFT JOIN m a ON a.id = g.message_id
           LEFT JOIN m h ON h.id = g.head_at_begin
          WHERE a.created_at < g.started_at OR a.created_at > g.finished_at OR h.created_at > g.started_at LIMIT 1)
        UNION ALL
        (SELECT format('generations: generation %s %s', g.id, CASE
                    WHEN g.started_at > p_now OR g.finished_at > p_now THEN 'is dated after the import'
                    WHEN g.finished_at < g.started_at THEN 'finished before it started'
                    ELSE 'started before its prompt message was created' END)
           FROM g JOIN mo m ON m.id = g.prompt_message_id
          WHERE g.started_at > p_now OR g.finished_at > p_now OR g.finished_at < g.started_at
             OR (NOT m.imported AND g.started_at < m.created_at) LIMIT 1)
        UNION ALL
        -- An import from another product writes no ledger row: a call of an
        -- imported message (whose times are the source's) is no call the
        -- API decided.
        (SELECT format('tool_calls: call %s is of message %s, imported from %s, which writes no ledger row',
                       k.tool_call_id, m.id, m.source)
           FROM k JOIN mo m ON m.id = k.message_id WHERE m.imported LIMIT 1)
        UNION ALL
        (SELECT format('tool_calls: call %s decided at %s, %s', k.tool_call_id, k.decided_at,
                       CASE WHEN k.decided_at > p_now THEN 'after the import' ELSE 'before its message was created' END)
           FROM k JOIN mo m ON m.id = k.message_id
          WHERE k.decided_at > p_now OR (NOT m.imported AND k.decided_at < m.created_at) LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s requested at %s, %s', e.id, e.requested_at,
                       CASE WHEN e.requested_at > p_now THEN 'after the import' ELSE 'before its call''s message was created' END)
           FROM e JOIN k ON k.effect_id = e.id AND k.decision IN ('execute', 'confirm', 'rejected')
           JOIN mo m ON m.id = k.message_id
          WHERE e.requested_at > p_now OR (NOT m.imported AND e.requested_at < m.created_at) LIMIT 1)
        UNION ALL
        (SELECT format('effects: effect %s %s at %s, %s', e.id, c.what, c.at,
                       CASE WHEN c.at > p_now THEN 'after the import' ELSE 'before it was requested' END)
           FROM e, LATERAL (VALUES ('confirmed', e.confirmed_at), ('settled', e.settled_at), ('compensated', e.compensated_at)) c (what, at)
          WHERE c.at > p_now OR c.at < e.requested_at LIMIT 1)
        UNION ALL
        -- The API sets confirmed_at, settled_at and compensated_at just
        -- before the event that records the change: each lies between that
        -- event and the one before it (or the request).
        (SELECT format('effects: effect %s %s at %s, not between event seq %s (%s) and the one before it (%s)',
                       x.effect_id, x.what, x.stamp, x.seq, x.at, x.before)
           FROM (SELECT w.effect_id, w.seq, w.at, w.before, c.what, c.stamp
                   FROM (SELECT v.effect_id, v.seq, v.at, v.from_state, v.to_state,
                                coalesce(lag(v.at) OVER (PARTITION BY v.effect_id ORDER BY v.seq), e.requested_at) AS before,
                                row_number() OVER (PARTITION BY v.effect_id, v.to_state IN ('applied', 'failed') ORDER BY v.seq) AS nth,
                                e.confirmed_at, e.settled_at, e.compensated_at
                           FROM v JOIN e ON e.id = v.effect_id) w
                  CROSS JOIN LATERAL (VALUES
                        ('confirmed', w.confirmed_at, w.from_state = 'awaiting_confirmation' AND w.to_state = 'pending'),
                        ('settled', w.settled_at, w.to_state IN ('applied', 'failed') AND w.nth = 1),
                        ('compensated', w.compensated_at, w.to_state = 'compensated')) c (what, stamp, this)
                  WHERE c.this AND c.stamp IS NOT NULL AND (c.stamp > w.at OR c.stamp < w.before)) x LIMIT 1)
        UNION ALL
        -- Its deadline is its tool's after its request, or after the
        -- confirmation that sent it again (record_tool_call, confirm_effect).
        -- The API adds the interval in the writer's time zone: exact for
        -- hours, minutes and seconds, and a day or month may move by a
        -- daylight-saving change, at most two hours.
        (SELECT format('effects: effect %s has deadline %s, not its tool''s deadline %s after %s', e.id, e.deadline_at,
                       t.deadline, coalesce(e.confirmed_at, e.requested_at))
           FROM e JOIN t ON t.name = e.tool_name AND t.version = e.tool_version
          WHERE e.deadline_at IS DISTINCT FROM coalesce(e.confirmed_at, e.requested_at) + t.deadline
            AND NOT ((date_part('day', t.deadline) <> 0 OR date_part('month', t.deadline) <> 0
                      OR date_part('year', t.deadline) <> 0)
                     AND e.deadline_at BETWEEN coalesce(e.confirmed_at, e.requested_at) + t.deadline - interval '2 hours'
                                           AND coalesce(e.confirmed_at, e.requested_at) + t.deadline + interval '2 hours')
          LIMIT 1)
        UNION ALL
        (SELECT format('effect_events: event seq %s of effect %s at %s, %s', x.seq, x.effect_id, x.at, CASE
                    WHEN x.at > p_now THEN 'after the import'
                    WHEN x.at < x.requested_at THEN 'before the effect was requested'
                    ELSE 'before the event before it' END)
           FROM (SELECT v.seq, v.effect_id, v.at, e.requested_at, lag(v.at) OVER (PARTITION BY v.effect_id ORDER BY v.seq) AS before
                   FROM v JOIN e ON e.id = v.effect_id) x
          WHERE x.at > p_now OR x.at < x.requested_at OR x.at < x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        -- The change log: each row once, each change from what the row
        -- before left (a title from none, an archive state or a deletion
        -- from false), the last one what the conversation holds (never
        -- deleted), in time order.
        (SELECT format('changes: row seq %s appears twice', ch.seq) FROM ch GROUP BY ch.seq HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changes %s, which is not title, archived or deleted', ch.seq, coalesce(ch.field, 'nothing'))
           FROM ch WHERE ch.field IS NULL OR ch.field NOT IN ('title', 'archived', 'deleted') LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changes %s from %s, which is not what it was (%s)', x.seq, x.field,
                       coalesce(x.old_value, 'none'), coalesce(x.before, 'none'))
           FROM (SELECT ch.seq, ch.field, ch.old_value,
                        coalesce(lag(ch.new_value, 1, CASE WHEN ch.field <> 'title' THEN 'false' END)
                                     OVER (PARTITION BY ch.field ORDER BY ch.seq),
                                 CASE WHEN ch.field <> 'title' THEN 'false' END) AS before
                   FROM ch WHERE ch.field IN ('title', 'archived', 'deleted')) x
          WHERE x.old_value IS DISTINCT FROM x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        (SELECT format('changes: the log leaves the %s %s (%s), the conversation holds %s', f.field, coalesce(f.logged, 'none'),
                       coalesce('row seq ' || f.seq, 'no row'), coalesce(f.held, 'none'))
           FROM (SELECT 'title' AS field, v_conv ->> 'title' AS held, x.new_value AS logged, x.seq
                   FROM (SELECT NULL) one
                   LEFT JOIN (SELECT ch.new_value, ch.seq FROM ch WHERE ch.field = 'title' ORDER BY ch.seq DESC LIMIT 1) x ON true
                 UNION ALL
                 SELECT 'archived', v_conv ->> 'archived', coalesce(x.new_value, 'false'), x.seq
                   FROM (SELECT NULL) one
                   LEFT JOIN (SELECT ch.new_value, ch.seq FROM ch WHERE ch.field = 'archived' ORDER BY ch.seq DESC LIMIT 1) x ON true
                 UNION ALL
                 -- A restore makes a conversation that is not deleted: a
                 -- deleted one's document restores once it is brought back.
                 SELECT 'deleted', 'false', coalesce(x.new_value, 'false'), x.seq
                   FROM (SELECT NULL) one
                   LEFT JOIN (SELECT ch.new_value, ch.seq FROM ch WHERE ch.field = 'deleted' ORDER BY ch.seq DESC LIMIT 1) x ON true) f
          WHERE f.held IS DISTINCT FROM f.logged LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changed at %s, %s', ch.seq, ch.changed_at,
                       CASE WHEN ch.changed_at > p_now THEN 'after the import' ELSE 'before the conversation' END)
           FROM ch WHERE ch.changed_at > p_now OR ch.changed_at < v_created ORDER BY ch.seq LIMIT 1)
        UNION ALL
        (SELECT format('changes: row seq %s changed at %s, before the row before it', x.seq, x.changed_at)
           FROM (SELECT ch.seq, ch.changed_at, lag(ch.changed_at) OVER (ORDER BY ch.seq) AS before FROM ch) x
          WHERE x.changed_at < x.before ORDER BY x.seq LIMIT 1)
        UNION ALL
        (SELECT format('conversation: last activity at %s, after the import', v_conv ->> 'last_activity_at')
          WHERE (v_conv ->> 'last_activity_at')::timestamptz > p_now)
        UNION ALL
        -- Erasures.
        (SELECT format('erasures: erasure %s dated %s, %s', r.id, r.erased_at,
                       CASE WHEN r.erased_at > p_now THEN 'after the import' ELSE 'before the conversation' END)
           FROM r WHERE r.erased_at > p_now OR r.erased_at < v_created LIMIT 1)
        UNION ALL
        -- Each copy of content is a row with a time: every erasure at or
        -- after it must have redacted it. So the row of each kind with the
        -- earliest time that is not redacted is the one to name, against
        -- the first erasure at or after it; the places are each erasure's
        -- own. One pass over the rows of each kind and one over the
        -- erasures per kind: linear in the document, not erasures x rows.
        -- An erased attachment (its uri emptied, which no write but
        -- erasure leaves) is under an erasure of the document.
        (SELECT format('messages: message %s holds an erased attachment (part %s), and no erasure of the export is after it',
                       m.id, p.n - 1)
           FROM m CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(m.parts) = 'array' THEN m.parts ELSE '[]' END)
                WITH ORDINALITY p (part, n)
          WHERE p.part ->> 'type' = 'attachment' AND p.part ->> 'uri' = ''
            AND m.created_at > coalesce((SELECT max(r.erased_at) FROM r), '-infinity') LIMIT 1)
        UNION ALL
        (SELECT format('erasures: erasure %s, but %s', x.id, x.what)
           FROM (SELECT f.id, f.erased_at, u.what
                   FROM (SELECT DISTINCT ON (u.kind) u.kind, u.since, u.what
                           FROM (SELECT 'messages' AS kind, m.created_at AS since,
                                        format('message %s, created before it, is not redacted', m.id) AS what
                                   FROM m WHERE m.parts::text IS DISTINCT FROM (convo_private.redact_row('messages', to_jsonb(m)) -> 'parts')::text
                                 UNION ALL
                                 SELECT 'metadata', '-infinity', 'the conversation''s metadata is not redacted'
                                  WHERE v_conv -> 'metadata' IS DISTINCT FROM '{}'::jsonb
                                 UNION ALL
                                 SELECT 'changes', ch.changed_at, format('change seq %s, before it, holds a title', ch.seq)
                                   FROM ch WHERE ch.field = 'title' AND (ch.old_value IS NOT NULL OR ch.new_value IS NOT NULL)
                                 UNION ALL
                                 -- The title stands for every erasure after its last change.
                                 SELECT 'title', coalesce((SELECT max(ch.changed_at) FROM ch WHERE ch.field = 'title'), '-infinity'),
                                        'the conversation''s title, set before it, is not redacted'
                                  WHERE v_conv ->> 'title' IS NOT NULL
                                 UNION ALL
                                 SELECT 'generations', g.started_at, format('generation %s, started before it, is not redacted', g.id)
                                   FROM g WHERE to_jsonb(g)::text IS DISTINCT FROM convo_private.redact_row('generations', to_jsonb(g))::text
                                 UNION ALL
                                 SELECT 'effects', e.requested_at, format('effect %s, requested before it, is not redacted', e.id)
                                   FROM e WHERE e.arguments IS DISTINCT FROM '{}'::jsonb
                                 UNION ALL
                                 SELECT 'events', v.at, format('event seq %s, before it, is not redacted', v.seq)
                                   FROM v WHERE v.evidence IS DISTINCT FROM '{}'::jsonb
                                 UNION ALL
                                 SELECT 'origins', m.created_at, format('the origin of message %s is not redacted', o.message_id)
                                   FROM o JOIN m ON m.id = o.message_id WHERE o.node IS DISTINCT FROM '{"erased": true}'::jsonb) u
                          WHERE EXISTS (SELECT 1 FROM r)
                          ORDER BY u.kind, u.since) u
                   CROSS JOIN LATERAL (SELECT r.id, r.erased_at FROM r WHERE r.erased_at >= u.since
                                        ORDER BY r.erased_at LIMIT 1) f
                 UNION ALL
                 SELECT r.id, r.erased_at, format('place %s is not one an erasure writes', x.place)
                   FROM r CROSS JOIN LATERAL jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                        x (place text, rows_redacted bigint)
                   LEFT JOIN counts c ON c.place = x.place
                  WHERE c.place IS NULL
                 UNION ALL
                 -- A place once an erasure, counting at least one row.
                 SELECT r.id, r.erased_at, CASE WHEN x.rows_redacted IS NULL OR x.rows_redacted < 1
                                                THEN format('place %s counts %s rows', x.place, coalesce(x.rows_redacted::text, 'no'))
                                                ELSE format('place %s appears twice', x.place) END
                   FROM r CROSS JOIN LATERAL (
                        SELECT y.place, y.rows_redacted, count(*) OVER (PARTITION BY y.place) AS times
                          FROM jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                               y (place text, rows_redacted bigint)) x
                  WHERE x.rows_redacted IS NULL OR x.rows_redacted < 1 OR x.times > 1
                 UNION ALL
                 SELECT r.id, r.erased_at, format('place %s counts %s rows, the export holds %s', x.place, x.rows_redacted, c.n)
                   FROM r CROSS JOIN LATERAL jsonb_to_recordset(CASE WHEN jsonb_typeof(r.places) = 'array' THEN r.places ELSE '[]' END)
                        x (place text, rows_redacted bigint)
                   JOIN counts c ON c.place = x.place
                  WHERE x.rows_redacted > c.n) x
          ORDER BY x.erased_at LIMIT 1)
        UNION ALL
        -- The record of imports.
        (SELECT format('imports: import %s %s', i.id, CASE
                    WHEN i.owner_id IS DISTINCT FROM p_owner_id THEN 'names another owner'
                    WHEN i.format IS NULL OR i.format NOT IN ('chatgpt', 'openwebui', 'librechat', 'pgconvo') THEN 'has an unknown format'
                    ELSE 'is dated after the import' END)
           FROM i
          WHERE i.owner_id IS DISTINCT FROM p_owner_id OR i.format IS NULL
             OR i.format NOT IN ('chatgpt', 'openwebui', 'librechat', 'pgconvo') OR i.imported_at > p_now LIMIT 1)
        UNION ALL
        -- Messages from another product are an import's: an import begins
        -- the log of the conversation it writes, and a merge finds its
        -- conversation by an earlier import of the source. A log begun
        -- otherwise ('create', or any move of the API's), or none at all,
        -- is a conversation the API began, holding no such message (nor a
        -- source's time from before it). Late, so that a rule naming what is
        -- wrong with the message itself (its origin, its times, a ledger
        -- call on it) speaks first.
        (SELECT format('head_log: %s, and message %s came from an import, which only a log begun by an import holds',
                       coalesce(format('row seq %s has reason %s', x.seq, x.reason), 'there is no head move'), m.id)
           FROM (SELECT 1) one
           LEFT JOIN (SELECT l.seq, l.reason FROM l ORDER BY l.seq LIMIT 1) x ON true
           JOIN mo m ON m.imported
          WHERE x.reason IS DISTINCT FROM 'import' LIMIT 1)
        UNION ALL
        -- Last, so that a rule naming the row at fault speaks first: the
        -- conversation is erased from its first erasure on, as
        -- erase_content marks it, and not deleted (a restore makes a
        -- conversation its owner sees).
        (SELECT format('conversation: erased_at %s, where the first of its erasures: %s', coalesce(c.erased_at::text, 'none'),
                       coalesce(f.id || ' at ' || f.erased_at, 'none'))
           FROM jsonb_populate_record(NULL::convo.conversations, v_conv) c
           LEFT JOIN LATERAL (SELECT r.id, r.erased_at FROM r ORDER BY r.erased_at, r.id LIMIT 1) f ON true
          WHERE c.erased_at IS DISTINCT FROM f.erased_at)
        UNION ALL
        (SELECT format('conversation: deleted at %s; a deleted conversation is restored once restore_deleted_conversation has brought it back',
                       c.deleted_at)
           FROM jsonb_populate_record(NULL::convo.conversations, v_conv) c WHERE c.deleted_at IS NOT NULL)
    ) AS problems (p)
    LIMIT 1;
    RETURN v_problem;
END;
$$;
