package bench

// benchSchema is the baselines' schema, `bench`, apart from pgconvo's: no
// trigger, no check and no row-level security of pgconvo's touches it. It
// holds the least PostgreSQL must store for the same jobs:
//
//   - bench.flat: a conversation as a flat (conversation_id, seq) list, the
//     read baseline of path, holding a copy of each loaded conversation's
//     live path; bench.flat_wide, the same list with the ten columns path
//     answers (the contract's), so that what those columns cost the read is
//     measured apart from what the tree costs;
//   - bench.conversations, bench.messages and bench.head_log: a tree with a
//     head pointer and a head log, the write baseline of append_message and
//     edit_and_resend, each write one statement (appendFloor, editFloor);
//   - the loader functions, which call pgconvo's API from a superuser's
//     server-side loop, so that loading costs no round trip per message.
const benchSchema = `
CREATE SCHEMA bench;

CREATE TABLE bench.flat (
    conversation_id uuid        NOT NULL,
    seq             int         NOT NULL,
    role            text        NOT NULL,
    parts           jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE bench.flat_wide (
    conversation_id uuid        NOT NULL,
    seq             int         NOT NULL,
    message_id      uuid        NOT NULL,
    parent_id       uuid,
    role            text        NOT NULL,
    parts           jsonb       NOT NULL,
    branch_reason   text,
    created_at      timestamptz NOT NULL,
    sibling_index   int         NOT NULL,
    sibling_count   int         NOT NULL,
    incomplete      boolean     NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE bench.conversations (
    id              uuid        NOT NULL PRIMARY KEY,
    owner_id        text        NOT NULL,
    head_message_id uuid,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE bench.messages (
    conversation_id uuid        NOT NULL,
    id              uuid        NOT NULL,
    parent_id       uuid,
    role            text        NOT NULL,
    parts           jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, id)
);
CREATE TABLE bench.head_log (
    conversation_id  uuid        NOT NULL,
    seq              bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    head_message_id  uuid        NOT NULL,
    previous_head_id uuid,
    moved_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    reason           text        NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

-- load_conversation: one synthetic conversation through the API, its live
-- path p_length messages long (a system prompt, then user and assistant
-- turns). With p_edit_every > 0, every user turn at a depth d with
-- d % p_edit_every = 1 gets a reply that is then abandoned by an edit
-- (edit_and_resend), so the path has a branch point there. With
-- p_effect_every > 0, every user turn at a depth d with d % p_effect_every = 1
-- is answered by a call of the effectful tool bench_purchase, its effect
-- settled as applied, a tool result and the answer.
CREATE FUNCTION bench.load_conversation(p_id uuid, p_owner text, p_length int, p_edit_every int,
                                        p_effect_every int, p_text text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_text  jsonb := jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_text));
    v_depth int := 0;
    v_user  uuid;
    v_call  text;
BEGIN
    PERFORM convo.create_conversation(p_owner, p_text, '{}', p_id);
    WHILE v_depth + 1 < p_length LOOP
        v_user := convo.append_message(p_id, 'user', v_text);
        v_depth := v_depth + 1;
        IF p_edit_every > 0 AND v_depth % p_edit_every = 1 THEN
            PERFORM convo.append_message(p_id, 'assistant', v_text);
            PERFORM convo.edit_and_resend(p_id, v_user, v_text);
        END IF;
        EXIT WHEN v_depth + 1 >= p_length;
        IF p_effect_every > 0 AND v_depth % p_effect_every = 1 AND v_depth + 3 < p_length THEN
            v_call := 'toolu_' || replace(gen_random_uuid()::text, '-', '');
            PERFORM convo.append_message(p_id, 'assistant', jsonb_build_array(jsonb_build_object(
                'type', 'tool_use', 'id', v_call, 'name', 'bench_purchase',
                'input', jsonb_build_object('amount_minor', 500, 'currency', 'EUR'))));
            PERFORM convo.settle_effect(p_id, (SELECT e.effect_id FROM convo.effect_for_call(p_id, v_call) e),
                                        'applied', p_external_ref => 'ch_' || v_call);
            PERFORM convo.append_message(p_id, 'tool', jsonb_build_array(jsonb_build_object(
                'type', 'tool_result', 'tool_use_id', v_call, 'content', 'ok')));
            v_depth := v_depth + 2;
        END IF;
        PERFORM convo.append_message(p_id, 'assistant', v_text);
        v_depth := v_depth + 1;
    END LOOP;
END;
$$;

-- add_searchable: p_count conversations of p_owner, each of 200 messages
-- (user and assistant in turn, a sentence each) written in one call of
-- the tree's write path, as an import writes a conversation, the head then
-- moved to the last; message 100
-- of each holds the word p_word, and of the first p_rare_count also
-- p_rare_word. For search_conversations.
CREATE FUNCTION bench.add_searchable(p_owner text, p_count int, p_word text, p_rare_word text, p_rare_count int)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_conv uuid;
    v_ids  uuid[];
BEGIN
    FOR i IN 1 .. p_count LOOP
        v_conv := convo.create_conversation(p_owner, NULL);
        v_ids := ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 200));
        PERFORM convo_private.write_messages(v_conv, NULL,
            convo_private.new_messages(
                v_ids,
                ARRAY(SELECT CASE WHEN k > 1 THEN v_ids[k - 1] END FROM generate_series(1, 200) k),
                ARRAY(SELECT CASE WHEN k % 2 = 1 THEN 'user' ELSE 'assistant' END FROM generate_series(1, 200) k),
                ARRAY(SELECT jsonb_build_array(jsonb_build_object('type', 'text', 'text',
                          format('Message %s of conversation %s talks about topic %s and the weather%s%s.', k, i, k % 50,
                                 CASE WHEN k = 100 THEN ' and ' || p_word ELSE '' END,
                                 CASE WHEN k = 100 AND i <= p_rare_count THEN ' and ' || p_rare_word ELSE '' END)))
                        FROM generate_series(1, 200) k),
                array_fill(NULL::text, ARRAY[200]), array_fill(NULL::timestamptz, ARRAY[200])));
        -- The head through the API, which alone moves a conversation's activity.
        PERFORM convo.move_head(v_conv, v_ids[200]);
    END LOOP;
END;
$$;

-- add_siblings: p_count edits of one user message, for alternatives.
CREATE FUNCTION bench.add_siblings(p_conversation_id uuid, p_message_id uuid, p_count int, p_text text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    FOR i IN 1 .. p_count LOOP
        PERFORM convo.edit_and_resend(p_conversation_id, p_message_id,
                                      jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_text || i)));
    END LOOP;
END;
$$;
`

// benchTool is the effectful tool of the synthetic data and of the agent
// turn, registered as the README's purchase example is.
const benchTool = `
SELECT convo.register_tool('bench_purchase', true,
       '{"type": "object", "required": ["amount_minor", "currency"], "additionalProperties": false,
         "properties": {"amount_minor": {"type": "integer", "minimum": 1},
                        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}',
       p_idempotency_scope => 'fork_args', p_amount_arg => 'amount_minor', p_currency_arg => 'currency')`

// appendFloor is the least a tree store must do to append a message, in one
// statement: lock the conversation, insert the child of the head, move the
// head, log the move. $1 conversation, $2 role, $3 parts.
const appendFloor = `
WITH c AS (SELECT id, head_message_id FROM bench.conversations WHERE id = $1 FOR NO KEY UPDATE),
     m AS (INSERT INTO bench.messages (conversation_id, id, parent_id, role, parts)
           SELECT c.id, gen_random_uuid(), c.head_message_id, $2, $3 FROM c
           RETURNING conversation_id, id),
     h AS (UPDATE bench.conversations b SET head_message_id = m.id FROM m WHERE b.id = m.conversation_id)
INSERT INTO bench.head_log (conversation_id, head_message_id, previous_head_id, reason)
SELECT m.conversation_id, m.id, c.head_message_id, 'append' FROM m, c`

// editFloor is the least a tree store must do for edit-and-resend, in one
// statement: lock the conversation, insert the edited message's sibling,
// move the head to it, log the move. $1 conversation, $2 message, $3 parts.
const editFloor = `
WITH c AS (SELECT id, head_message_id FROM bench.conversations WHERE id = $1 FOR NO KEY UPDATE),
     o AS (SELECT parent_id FROM bench.messages WHERE conversation_id = $1 AND id = $2),
     m AS (INSERT INTO bench.messages (conversation_id, id, parent_id, role, parts)
           SELECT c.id, gen_random_uuid(), o.parent_id, 'user', $3 FROM c, o
           RETURNING conversation_id, id),
     h AS (UPDATE bench.conversations b SET head_message_id = m.id FROM m WHERE b.id = m.conversation_id)
INSERT INTO bench.head_log (conversation_id, head_message_id, previous_head_id, reason)
SELECT m.conversation_id, m.id, c.head_message_id, 'user_edit' FROM m, c`

// flatRead is path's baseline: the flat list of one conversation, in order.
const flatRead = `SELECT seq, role, parts, created_at FROM bench.flat WHERE conversation_id = $1 ORDER BY seq`

// wideRead is the flat list with path's ten columns, in path's order.
const wideRead = `SELECT seq AS depth, message_id, parent_id, role, parts, branch_reason, created_at, sibling_index,
       sibling_count, incomplete FROM bench.flat_wide WHERE conversation_id = $1 ORDER BY seq`
