-- ledger_problems: every ledger row of one conversation (NULL: of every
-- conversation) that the API could not have written, one row each, naming
-- the row and what is wrong with it:
--   a call's decision that does not follow from the tool version it was
--   checked against (replay for an effectful tool, a ledger decision for one
--   without effects), or that names another tool than its tool_use part;
--   a call placed (branch and depth, which the re-run lookup reads) other
--   than its message (a call without a place, from before calls kept one,
--   is read as before), or decided before a call above it on its branch
--   (a branch is written top down: the lookup takes a branch's deepest
--   call as its latest);
--   a fork point that is not the call's (fork_points: the walk of
--   fork_point_of, made once down each conversation's tree, so an agent
--   turn of k calls costs its length once, not k times);
--   a reuse whose effect's scope key is not the one the call would compute
--   (a link across scopes);
--   an effect its creating call does not explain: another tool version, a
--   first state the decision does not give, a rejection without its 422, a
--   re-run that repeats no earlier call of the same tool and fork point on
--   another branch, arguments other than the call's input, an amount or
--   currency other than the registration reads from them (effect_money), a
--   scope key other than scope_key computes, a verdict of the schema other
--   than args_errors gives.
-- A key is computed in its key epoch (key_epoch): an effect's at its
-- requested_at, a reusing call's at its decided_at.
-- Content erased since (a part that is exactly its redaction) is not
-- compared: only its shape is left. self_check reports these for the whole
-- database, so a forgery by a superuser's hand is found too;
-- import_conversation refuses a document that leaves any (CV011).
CREATE OR REPLACE FUNCTION convo_private.ledger_problems(p_conversation_id uuid)
RETURNS TABLE (conversation_id uuid, row_name text, problem text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH calls AS MATERIALIZED (
        SELECT l.conversation_id, l.tool_call_id, l.message_id, l.effect_id, l.decision, l.fork_point_id,
               l.decided_at, l.tool_name, l.tool_version, p.tool_name AS part_tool, m.parts -> l.ordinal -> 'input' AS input,
               l.branch_id, l.depth, m.branch_id AS message_branch, m.depth AS message_depth,
               (m.parts -> l.ordinal)::text = convo_private.redact_part(m.parts -> l.ordinal)::text AS erased,
               t.effectful, t.idempotency_scope AS scope
          FROM convo.tool_effect_calls l
          JOIN convo.keyed_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
          JOIN convo.tools t ON t.name = l.tool_name AND t.version = l.tool_version
         WHERE p_conversation_id IS NULL OR l.conversation_id = p_conversation_id),
    effects AS MATERIALIZED (
        SELECT e.conversation_id, e.id, e.tool_name, e.tool_version, e.idempotency_key, e.scope_key, e.arguments,
               e.amount_minor, e.currency::text AS currency, e.repeats_effect_id, e.http_status, e.error_code,
               e.requested_at,
               t.effectful, t.idempotency_scope AS scope, t.amount_arg, t.currency_arg, t.args_schema,
               c.tool_call_id AS by_call, c.decision AS by_decision, c.input AS by_input, c.erased AS by_erased,
               c.message_id AS by_message, c.fork_point_id AS by_fork, c.tool_name AS by_tool,
               c.tool_version AS by_version,
               (SELECT v.to_state FROM convo.tool_effect_events v
                 WHERE v.conversation_id = e.conversation_id AND v.effect_id = e.id
                 ORDER BY v.seq LIMIT 1) AS first_state
          FROM convo.tool_effects e
          JOIN convo.tools t ON t.name = e.tool_name AND t.version = e.tool_version
          JOIN calls c ON c.conversation_id = e.conversation_id AND c.effect_id = e.id
                      AND c.decision IN ('execute', 'confirm', 'rejected')
         WHERE p_conversation_id IS NULL OR e.conversation_id = p_conversation_id),
    forks AS MATERIALIZED (
        SELECT v.conversation_id, f.message_id, f.fork
          FROM (SELECT DISTINCT c.conversation_id FROM calls c) v
         CROSS JOIN LATERAL convo_private.fork_points(v.conversation_id) f)
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('decision %s for %s version %s, which %s', c.decision, c.tool_name, c.tool_version,
                  CASE WHEN c.effectful THEN 'is effectful (replay is for tools without effects)'
                       ELSE 'has no effects (its calls are replayed)' END)
      FROM calls c
     WHERE (c.decision = 'replay') = c.effectful
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('is recorded for tool %s, its tool_use part names %s', c.tool_name, c.part_tool)
      FROM calls c
     WHERE c.tool_name IS DISTINCT FROM c.part_tool
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('is placed on branch %s at depth %s, its message %s is on branch %s at depth %s',
                  c.branch_id, c.depth, c.message_id, c.message_branch, c.message_depth)
      FROM calls c
     WHERE c.branch_id IS NOT NULL
       AND (c.branch_id, c.depth) IS DISTINCT FROM (c.message_branch, c.message_depth)
    UNION ALL
    SELECT o.conversation_id, 'tool call ' || o.tool_call_id,
           format('is decided at %s, before a call above it on its branch (at %s): a branch''s calls are decided top down',
                  o.decided_at, o.above)
      FROM (SELECT c.conversation_id, c.tool_call_id, c.decided_at,
                   max(c.decided_at) OVER (PARTITION BY c.conversation_id, c.branch_id ORDER BY c.depth
                                           RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS above
              FROM calls c
             WHERE c.branch_id IS NOT NULL) o
     WHERE o.above > o.decided_at
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('fork point %s, the call''s is %s', coalesce(c.fork_point_id::text, 'the conversation'),
                  coalesce(f.fork::text, 'the conversation'))
      FROM calls c
      LEFT JOIN forks f ON f.conversation_id = c.conversation_id AND f.message_id = c.message_id
     WHERE c.fork_point_id IS DISTINCT FROM f.fork
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('reuses effect %s, whose scope key is not the one the call computes (%s)', c.effect_id, c.scope)
      FROM calls c
      JOIN convo.tool_effects e ON e.conversation_id = c.conversation_id AND e.id = c.effect_id
     WHERE c.decision = 'reuse' AND NOT c.erased
       AND e.scope_key IS DISTINCT FROM convo_private.scope_key(c.scope, c.conversation_id, c.tool_call_id,
                                                                c.fork_point_id, c.tool_name, c.input,
                                                                convo_private.key_epoch(c.conversation_id, c.decided_at))
    UNION ALL
    SELECT e.conversation_id, 'effect ' || e.id, x.problem
      FROM effects e
     CROSS JOIN LATERAL convo_private.effect_money(e.arguments, e.amount_arg, e.currency_arg) m
     CROSS JOIN LATERAL (VALUES
        (CASE WHEN (e.by_tool, e.by_version) IS DISTINCT FROM (e.tool_name, e.tool_version)
              THEN format('is of %s version %s, its call %s of %s version %s', e.tool_name, e.tool_version,
                          e.by_call, e.by_tool, e.by_version) END),
        (CASE WHEN e.first_state IS DISTINCT FROM CASE e.by_decision WHEN 'execute' THEN 'pending'
                                                                     WHEN 'confirm' THEN 'awaiting_confirmation'
                                                                     ELSE 'failed' END
              THEN format('began %s, its call %s decided %s', coalesce(e.first_state, 'with no event'), e.by_call,
                          e.by_decision) END),
        (CASE WHEN e.by_decision = 'rejected' AND (e.http_status, e.error_code) IS DISTINCT FROM (422, 'invalid_arguments')
              THEN format('was rejected with %s %s, not 422 invalid_arguments', e.http_status, e.error_code) END),
        (CASE WHEN (e.by_decision = 'confirm') <> (e.repeats_effect_id IS NOT NULL)
              THEN format('repeats %s, its call %s decided %s', coalesce(e.repeats_effect_id::text, 'nothing'),
                          e.by_call, e.by_decision) END),
        (CASE WHEN e.by_decision = 'confirm' AND NOT EXISTS (
                  SELECT 1 FROM calls r
                   WHERE r.conversation_id = e.conversation_id AND r.effect_id = e.repeats_effect_id
                     AND r.decision IN ('execute', 'reuse', 'confirm') AND r.tool_name = e.by_tool
                     AND r.fork_point_id IS NOT DISTINCT FROM e.by_fork
                     AND NOT convo_private.is_on_path(e.conversation_id, r.message_id, e.by_message))
              THEN format('repeats effect %s, which no call of %s at the same fork point on another branch made',
                          e.repeats_effect_id, e.by_tool) END),
        (CASE WHEN NOT e.by_erased AND e.arguments::text IS DISTINCT FROM e.by_input::text
              THEN format('has arguments other than the input of its call %s', e.by_call) END),
        (CASE WHEN NOT e.by_erased AND (e.amount_minor, e.currency) IS DISTINCT FROM (m.amount_minor, m.currency)
              THEN format('amount %s %s, its arguments say %s %s (tool %s version %s reads %s and %s)',
                          coalesce(e.amount_minor::text, 'none'), coalesce(e.currency, 'none'),
                          coalesce(m.amount_minor::text, 'none'), coalesce(m.currency, 'none'),
                          e.tool_name, e.tool_version, coalesce(e.amount_arg, 'no amount'),
                          coalesce(e.currency_arg, 'no currency')) END),
        (CASE WHEN NOT e.by_erased
                   AND e.scope_key IS DISTINCT FROM convo_private.scope_key(
                           CASE WHEN e.by_decision = 'rejected' THEN 'rejected' ELSE e.scope END,
                           e.conversation_id, e.by_call, e.by_fork, e.tool_name, e.by_input,
                           convo_private.key_epoch(e.conversation_id, e.requested_at))
              THEN format('scope key is not the one its call %s computes', e.by_call) END),
        (CASE WHEN NOT e.by_erased AND e.effectful
                   AND (e.by_decision = 'rejected') <> (cardinality(convo.args_errors(e.args_schema, e.by_input)) > 0)
              THEN format('was %s, but its input %s the schema of %s version %s', e.by_decision,
                          CASE WHEN e.by_decision = 'rejected' THEN 'passes' ELSE 'fails' END,
                          e.tool_name, e.tool_version) END)
     ) AS x (problem)
     WHERE x.problem IS NOT NULL;
END;
$$;
