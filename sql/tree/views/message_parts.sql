-- message_parts: the parts of each message, one row a part (the contract's
-- table, as DBAs query it), read from the message's own array: a part is
-- stored once. The parts addressed by key (tool calls and results,
-- attachments) also have their keyed row (convo.keyed_parts), which the
-- ledger references. security_invoker: the reader's own rights and
-- row-level security apply (convo_reader reads every row; convo_app,
-- which reads no table, reads none of it). Written never
-- (message_parts_10_refuse).
CREATE OR REPLACE VIEW convo.message_parts WITH (security_invoker = true) AS
SELECT m.conversation_id,
       m.id AS message_id,
       (e.n - 1)::int AS ordinal,
       e.part ->> 'type' AS type,
       CASE e.part ->> 'type' WHEN 'tool_use' THEN e.part ->> 'id' WHEN 'tool_result' THEN e.part ->> 'tool_use_id' END
           AS tool_call_id,
       CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END AS tool_name,
       e.part AS body
  FROM convo.messages m
 CROSS JOIN LATERAL jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n);

COMMENT ON VIEW convo.message_parts IS
    'The parts of each message, one row a part, read from the message''s array (stored once); never written.';
