-- The seed's story, in psql: a conversation with a system prompt, three user
-- turns and two tool calls; an edit three turns back; a second edit; and a
-- switch back to the original path. Nothing is ever updated or deleted.
-- Run it with: psql "$DATABASE_URL" -f examples/walkthrough.sql
-- DATABASE_URL connects as the application (a login member of convo_app,
-- web in README.md), so every transaction names its owner first with
-- SET LOCAL convo.owner_id, as an application does.
-- (tests/walkthrough_test.go runs it too, as such a login, so it cannot rot.)
-- The ids are the client's own (retry-safe): c0... conversation, a... messages.

-- The conversation, with its system prompt.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';   -- every transaction names its owner first
SELECT convo.create_conversation('customer-42', 'You are the support assistant of a shop.', '{"channel": "web"}',
                                 'c0000000-0000-4000-8000-000000000001');
COMMIT;

-- Turn 1 and 2: plain questions.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'user',
       '[{"type": "text", "text": "Hi, I ordered a lamp last week."}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000001');
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'assistant',
       '[{"type": "text", "text": "Happy to help. What would you like to know?"}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000002');
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'user',
       '[{"type": "text", "text": "It is order 1008."}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000003');
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'assistant',
       '[{"type": "text", "text": "Got it, order 1008."}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000004');
COMMIT;

-- Turn 3 (U3): two tool calls in one assistant message, their results in a tool message, an answer.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'user',
       '[{"type": "text", "text": "When does it arrive, and can you buy me 500 credits?"}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000005');
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'assistant',
       '[{"type": "tool_use", "id": "toolu_01", "name": "lookup_delivery", "input": {"order": 1008}},
         {"type": "tool_use", "id": "toolu_02", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000006');
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'tool',
       '[{"type": "tool_result", "tool_use_id": "toolu_01", "content": {"arrives": "Friday"}},
         {"type": "tool_result", "tool_use_id": "toolu_02", "content": {"charge": "ch_3PkQ8sJ1n4Yh2P"}, "is_error": false}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000007');
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'assistant',
       '[{"type": "text", "text": "It arrives Friday, and 500 credits are on your account."}]',
       p_message_id => 'a0000000-0000-4000-8000-000000000008');
COMMIT;

-- The live path: nine messages, root to head.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT depth, role, parts -> 0 ->> 'type' AS first_part, sibling_index, sibling_count
  FROM convo.path('c0000000-0000-4000-8000-000000000001');
COMMIT;

-- Edit three turns back: U3 gets a sibling; its whole subtree (four messages,
-- two tool calls) leaves the path without any row being touched.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT convo.edit_and_resend('c0000000-0000-4000-8000-000000000001', 'a0000000-0000-4000-8000-000000000005',
       '[{"type": "text", "text": "When does it arrive?"}]',
       p_new_message_id => 'a0000000-0000-4000-8000-000000000009');
SELECT convo.append_message('c0000000-0000-4000-8000-000000000001', 'assistant',
       '[{"type": "text", "text": "Friday."}]',
       p_message_id => 'a0000000-0000-4000-8000-00000000000a');
COMMIT;

-- "You previously asked ...": both versions of U3, the new one on the path.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT message_id, branch_reason, on_head_path, latest_leaf_id
  FROM convo.alternatives('c0000000-0000-4000-8000-000000000001', 'a0000000-0000-4000-8000-000000000005');
COMMIT;

-- A second edit: three siblings, the newest shown as 3 of 3.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT convo.edit_and_resend('c0000000-0000-4000-8000-000000000001', 'a0000000-0000-4000-8000-000000000005',
       '[{"type": "text", "text": "Where is my lamp?"}]',
       p_new_message_id => 'a0000000-0000-4000-8000-00000000000b');
SELECT depth, role, sibling_index, sibling_count
  FROM convo.path('c0000000-0000-4000-8000-000000000001')
 WHERE depth = 5;
COMMIT;

-- Switch back to the original answer: the original path is live again.
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT convo.move_head('c0000000-0000-4000-8000-000000000001', 'a0000000-0000-4000-8000-000000000008');
SELECT depth, role, parts -> 0 ->> 'text' AS text
  FROM convo.path('c0000000-0000-4000-8000-000000000001');
COMMIT;

-- Every head movement, oldest first: the answer to "what did the customer see at 14:03".
BEGIN;
SET LOCAL convo.owner_id = 'customer-42';
SELECT seq, head_message_id, previous_head_id, reason
  FROM convo.head_history('c0000000-0000-4000-8000-000000000001');
COMMIT;
