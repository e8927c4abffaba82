-- is_erasure: whether an UPDATE of a row is an erasure: the new row is
-- exactly redact_row of the old one, and this very transaction recorded an
-- erasure of the row's conversation (or, for a receipt, of its owner) in
-- convo.erasures, which only erase_conversation and erase_owner write. No
-- setting or argument can make it true: it is the one way past the
-- append-only and state-machine triggers.
CREATE OR REPLACE FUNCTION convo_private.is_erasure(p_table text, p_old jsonb, p_new jsonb)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN p_new::text = convo_private.redact_row(p_table, p_old)::text
   AND EXISTS (SELECT 1 FROM convo.erasures e
                WHERE e.xact = pg_current_xact_id()
                  AND CASE WHEN p_table = 'tool_receipts'
                           THEN e.conversation_id IS NULL AND e.owner_id = p_old ->> 'owner_id'
                           ELSE e.conversation_id = (CASE p_table WHEN 'conversations' THEN p_old ->> 'id'
                                                                  ELSE p_old ->> 'conversation_id' END)::uuid
                      END);
