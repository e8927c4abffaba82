-- 0001_tree: conversations, the append-only message tree, its parts and the head log.
--
-- The tree never loses a row: edit-and-resend and regenerate insert siblings,
-- and "which conversation was live at 14:03" is answered by the head log.
-- Every key of a conversation-scoped table starts with conversation_id so
-- the tables can later be distributed by conversation.

CREATE SCHEMA convo;
COMMENT ON SCHEMA convo IS 'pgconvo: the conversation tree, its head log, and (later) effects and receipts.';

-- A conversation owns one head pointer. The head is the only mutable fact
-- of the tree; every change of it is logged by conversations_head_log.
CREATE TABLE convo.conversations (
    id              uuid        NOT NULL PRIMARY KEY,
    owner_id        text        NOT NULL CHECK (owner_id <> ''),
    head_message_id uuid,
    metadata        jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX conversations_owner_idx ON convo.conversations (owner_id, created_at);

-- Messages are the nodes of the tree, parent-linked and never changed.
-- depth, sibling_index and branch_id are computed by messages_fill_tree:
-- a branch is a run of first children, so the path from the root to any
-- message is one index range scan per branch point on it (path_from).
-- parts holds the message's parts as given, so that reading the path reads
-- one row per message, like a flat list; message_parts holds the same parts
-- one row each, for constraints and queries on single parts.
CREATE TABLE convo.messages (
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id),
    id              uuid        NOT NULL,
    parent_id       uuid,
    role            text        NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    branch_reason   text        CHECK (branch_reason IN ('user_edit', 'regenerate', 'branch')),
    depth           int         NOT NULL CHECK (depth >= 0),
    sibling_index   int         NOT NULL CHECK (sibling_index >= 1),
    branch_id       uuid        NOT NULL,
    parts           jsonb       NOT NULL CHECK (jsonb_typeof(parts) = 'array' AND jsonb_array_length(parts) > 0),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, id),
    FOREIGN KEY (conversation_id, parent_id) REFERENCES convo.messages (conversation_id, id),
    -- siblings are numbered 1, 2, 3 ... in creation order ("< 2/3 >")
    CONSTRAINT messages_sibling_key UNIQUE NULLS NOT DISTINCT (conversation_id, parent_id, sibling_index),
    -- a branch is linear: one message per depth
    CONSTRAINT messages_branch_key UNIQUE (conversation_id, branch_id, depth),
    CHECK ((parent_id IS NULL) = (depth = 0)),
    CHECK (parent_id IS DISTINCT FROM id),
    -- the first child continues its parent's branch; every other child starts one
    CHECK ((sibling_index = 1) = (branch_reason IS NULL)),
    CHECK ((branch_id = id) = (parent_id IS NULL OR sibling_index > 1))
);
-- The siblings after the first: few rows, read by path() for sibling_count.
CREATE INDEX messages_forks_idx ON convo.messages (conversation_id, parent_id, sibling_index) WHERE sibling_index > 1;
-- Lets a lookup tell "another conversation's message" (CV003) from "no such message" (CV002).
CREATE INDEX messages_id_idx ON convo.messages (id);

ALTER TABLE convo.conversations
    ADD CONSTRAINT conversations_head_fkey FOREIGN KEY (id, head_message_id)
    REFERENCES convo.messages (conversation_id, id);

-- One row a part, written by messages_split_parts from messages.parts (and
-- checked by message_parts_check to be exactly that element). type,
-- tool_call_id and tool_name are derived from body and tied to it by CHECK
-- constraints, so the unique index on tool_use ids is a real constraint.
CREATE TABLE convo.message_parts (
    conversation_id uuid  NOT NULL,
    message_id      uuid  NOT NULL,
    ordinal         int   NOT NULL CHECK (ordinal >= 0),
    type            text  NOT NULL CHECK (type IN ('text', 'tool_use', 'tool_result', 'attachment')),
    tool_call_id    text,
    tool_name       text,
    body            jsonb NOT NULL,
    PRIMARY KEY (conversation_id, message_id, ordinal),
    FOREIGN KEY (conversation_id, message_id) REFERENCES convo.messages (conversation_id, id),
    CHECK (body ->> 'type' = type),
    CHECK (tool_call_id IS NOT DISTINCT FROM CASE type WHEN 'tool_use' THEN body ->> 'id'
                                                     WHEN 'tool_result' THEN body ->> 'tool_use_id' END),
    CHECK (tool_name IS NOT DISTINCT FROM CASE type WHEN 'tool_use' THEN body ->> 'name' END)
);
-- A tool call id names one tool_use in its conversation (its results repeat it).
CREATE UNIQUE INDEX message_parts_tool_use_key ON convo.message_parts (conversation_id, tool_call_id)
    WHERE type = 'tool_use';

-- Every head movement, written by the trigger conversations_head_log in the
-- transaction that moved the head. seq orders moves, including two moves in
-- one transaction (a (conversation_id, moved_at) key with now() would collide).
CREATE TABLE convo.conversation_head_log (
    conversation_id  uuid        NOT NULL REFERENCES convo.conversations (id),
    seq              bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
    head_message_id  uuid        NOT NULL,
    previous_head_id uuid,
    moved_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    moved_by         text,
    reason           text        NOT NULL CHECK (reason ~ '^[a-z][a-z0-9_]{0,62}$'),
    PRIMARY KEY (conversation_id, seq),
    FOREIGN KEY (conversation_id, head_message_id) REFERENCES convo.messages (conversation_id, id),
    FOREIGN KEY (conversation_id, previous_head_id) REFERENCES convo.messages (conversation_id, id)
);
CREATE INDEX conversation_head_log_at_idx ON convo.conversation_head_log (conversation_id, moved_at, seq);

-- Functions (current text in sql/functions/, one per file).

-- add_sibling: the shared write path of edit_and_resend and regenerate: a new
-- message beside an existing one (same parent), the head moved to it. No
-- existing row changes; the old subtree simply stops being on the path.
CREATE OR REPLACE FUNCTION convo.add_sibling(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid,
    p_new_message_id  uuid,
    p_moved_by        text,
    p_role            text,
    p_branch_reason   text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_head     uuid := convo.lock_conversation(p_conversation_id);
    v_original convo.messages := convo.message_ref(p_conversation_id, p_message_id);
    v_id       uuid := coalesce(p_new_message_id, gen_random_uuid());
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id);
    END IF;
    IF convo.is_retry(p_conversation_id, p_new_message_id, p_role, p_parts, v_original.parent_id, true) THEN
        RETURN p_new_message_id;
    END IF;
    PERFORM convo.check_expected_head(p_conversation_id, p_expected_head, v_head);
    IF v_original.role <> p_role THEN
        RAISE EXCEPTION '% takes a message of role %; message % has role %',
                CASE p_branch_reason WHEN 'user_edit' THEN 'edit_and_resend' ELSE 'regenerate' END,
                p_role, p_message_id, v_original.role
            USING ERRCODE = 'CV004', DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id);
    END IF;
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts)
    VALUES (p_conversation_id, v_id, v_original.parent_id, p_role, p_branch_reason, p_parts);
    PERFORM convo.move_head_to(p_conversation_id, v_id, p_branch_reason, p_moved_by);
    RETURN v_id;
END;
$$;

-- alternatives: a message and its siblings, oldest first ("you previously
-- asked ..."): whether each is on the live path, and the most recently
-- created leaf below it, to switch to with move_head.
CREATE OR REPLACE FUNCTION convo.alternatives(p_conversation_id uuid, p_message_id uuid)
RETURNS TABLE (message_id uuid, branch_reason text, created_at timestamptz, on_head_path boolean,
               latest_leaf_id uuid)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_head    uuid := (convo.conversation_ref(p_conversation_id)).head_message_id;
    v_message convo.messages := convo.message_ref(p_conversation_id, p_message_id);
BEGIN
    RETURN QUERY
    WITH RECURSIVE siblings AS (
        SELECT s.id, s.branch_reason, s.created_at, s.sibling_index
          FROM convo.messages s
         WHERE s.conversation_id = p_conversation_id
           AND s.parent_id IS NOT DISTINCT FROM v_message.parent_id
    ), below (sibling_id, id, created_at) AS (
        SELECT s.id, s.id, s.created_at FROM siblings s
        UNION ALL
        SELECT b.sibling_id, c.id, c.created_at
          FROM below b
          JOIN convo.messages c ON c.conversation_id = p_conversation_id AND c.parent_id = b.id
    )
    SELECT s.id, s.branch_reason, s.created_at,
           convo.is_on_path(p_conversation_id, s.id, v_head),
           (SELECT b.id FROM below b
             WHERE b.sibling_id = s.id
               AND NOT EXISTS (SELECT 1 FROM convo.messages c
                                WHERE c.conversation_id = p_conversation_id AND c.parent_id = b.id)
             ORDER BY b.created_at DESC, b.id DESC
             LIMIT 1)
      FROM siblings s
     ORDER BY s.sibling_index;
END;
$$;

COMMENT ON FUNCTION convo.alternatives(uuid, uuid) IS
    'A message and its siblings, oldest first: whether each is on the live path, and its most recent leaf.';

-- append_message: a child of the current head (a root if there is none), and
-- the head moves to it. A repeat with the same p_message_id is recognised
-- before any other check and returns the first result, writing nothing.
CREATE OR REPLACE FUNCTION convo.append_message(
    p_conversation_id uuid,
    p_role            text,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_message_id      uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_head uuid := convo.lock_conversation(p_conversation_id);
    v_id   uuid := coalesce(p_message_id, gen_random_uuid());
BEGIN
    IF p_role IS NULL OR p_parts IS NULL THEN
        RAISE EXCEPTION 'p_role and p_parts are required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF convo.is_retry(p_conversation_id, p_message_id, p_role, p_parts, NULL, false) THEN
        RETURN p_message_id;
    END IF;
    PERFORM convo.check_expected_head(p_conversation_id, p_expected_head, v_head);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts)
    VALUES (p_conversation_id, v_id, v_head, p_role, p_parts);
    PERFORM convo.move_head_to(p_conversation_id, v_id, 'append', p_moved_by);
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.append_message(uuid, text, jsonb, uuid, uuid, text) IS
    'Append a message under the current head and move the head to it; compare-and-set with p_expected_head, retry-safe by p_message_id.';

-- check_expected_head: the compare-and-set of a write. When the caller names
-- the head it expects and the head has moved, CV001 names the current head.
CREATE OR REPLACE FUNCTION convo.check_expected_head(p_conversation_id uuid, p_expected_head uuid, p_current_head uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF p_expected_head IS NOT NULL AND p_expected_head IS DISTINCT FROM p_current_head THEN
        RAISE EXCEPTION 'the head of conversation % has moved', p_conversation_id
            USING ERRCODE = 'CV001',
                  DETAIL = format('expected head %s, current head %s', p_expected_head, coalesce(p_current_head::text, 'none'));
    END IF;
END;
$$;

-- check_parts: the checks on a message's parts as a whole (present, a
-- non-empty array, under the message cap), with the contract's SQLSTATEs;
-- each part is checked by message_parts_check.
CREATE OR REPLACE FUNCTION convo.check_parts(p_parts jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011';
    END IF;
    IF jsonb_typeof(p_parts) <> 'array' THEN
        RAISE EXCEPTION 'p_parts must be a JSON array, not %', jsonb_typeof(p_parts) USING ERRCODE = 'CV008';
    END IF;
    IF jsonb_array_length(p_parts) = 0 THEN
        RAISE EXCEPTION 'p_parts must not be empty' USING ERRCODE = 'CV008';
    END IF;
    IF octet_length(p_parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'a message is larger than % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s bytes', octet_length(p_parts::text));
    END IF;
END;
$$;

-- conversation_ref: the conversation row for a read, or CV002 when there is
-- none (a read takes no lock: it sees one consistent snapshot).
CREATE OR REPLACE FUNCTION convo.conversation_ref(p_conversation_id uuid)
RETURNS convo.conversations
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_conversation convo.conversations;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_conversation FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_conversation;
END;
$$;

-- conversations_guard: of a conversation only the head (and, for erasure,
-- the metadata) may change; its id, owner and creation time are fixed, and
-- a head once set is never unset (the head always names a message).
CREATE OR REPLACE FUNCTION convo.conversations_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'a conversation''s id, owner_id and created_at never change'
            USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id);
    END IF;
    IF OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL THEN
        RAISE EXCEPTION 'the head of a conversation cannot be unset'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, head %s', OLD.id, OLD.head_message_id);
    END IF;
    RETURN NEW;
END;
$$;

-- create_conversation: a new conversation; with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
-- Retry-safe through p_conversation_id: the same call returns the same id.
CREATE OR REPLACE FUNCTION convo.create_conversation(
    p_owner_id        text,
    p_system_prompt   text DEFAULT NULL,
    p_metadata        jsonb DEFAULT '{}',
    p_conversation_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_id       uuid := coalesce(p_conversation_id, gen_random_uuid());
    v_existing convo.conversations;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011';
    END IF;
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'p_metadata must be a JSON object' USING ERRCODE = 'CV011';
    END IF;
    IF octet_length(p_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s bytes', octet_length(p_metadata::text));
    END IF;

    INSERT INTO convo.conversations (id, owner_id, metadata)
    VALUES (v_id, p_owner_id, p_metadata)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- A retry: the same owner, metadata and system prompt return the first result.
        PERFORM convo.lock_conversation(v_id);
        SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = v_id;
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata IS DISTINCT FROM p_metadata
           OR (SELECT m.parts FROM convo.messages m
                WHERE m.conversation_id = v_id AND m.parent_id IS NULL AND m.sibling_index = 1
                  AND m.role = 'system') IS DISTINCT FROM v_parts THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        RETURN v_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        INSERT INTO convo.messages (conversation_id, id, role, parts) VALUES (v_id, v_root, 'system', v_parts);
        PERFORM convo.move_head_to(v_id, v_root, 'create', NULL);
    END IF;
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.create_conversation(text, text, jsonb, uuid) IS
    'New conversation for an owner; a system prompt becomes the root message and the head. Retry-safe by p_conversation_id.';

-- head_at: the head at an instant, read from the head log (the last move at
-- or before p_at); NULL if the conversation had no head yet.
CREATE OR REPLACE FUNCTION convo.head_at(p_conversation_id uuid, p_at timestamptz)
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
BEGIN
    PERFORM convo.conversation_ref(p_conversation_id);
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'p_at is required' USING ERRCODE = 'CV011';
    END IF;
    RETURN (SELECT l.head_message_id
              FROM convo.conversation_head_log l
             WHERE l.conversation_id = p_conversation_id AND l.moved_at <= p_at
             ORDER BY l.moved_at DESC, l.seq DESC
             LIMIT 1);
END;
$$;

COMMENT ON FUNCTION convo.head_at(uuid, timestamptz) IS
    'The head at instant p_at, from the head log; NULL before the first head.';

-- head_history: every head movement of a conversation, oldest first.
CREATE OR REPLACE FUNCTION convo.head_history(p_conversation_id uuid)
RETURNS TABLE (seq bigint, head_message_id uuid, previous_head_id uuid, moved_at timestamptz,
               moved_by text, reason text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
BEGIN
    PERFORM convo.conversation_ref(p_conversation_id);
    RETURN QUERY
    SELECT l.seq, l.head_message_id, l.previous_head_id, l.moved_at, l.moved_by, l.reason
      FROM convo.conversation_head_log l
     WHERE l.conversation_id = p_conversation_id
     ORDER BY l.seq;
END;
$$;

COMMENT ON FUNCTION convo.head_history(uuid) IS
    'Every head movement of the conversation, oldest first (the append-only head log).';

-- is_on_path: whether a message sits on the path from the root to p_head_id
-- (is the head or one of its ancestors), by the same branch walk as path.
CREATE OR REPLACE FUNCTION convo.is_on_path(p_conversation_id uuid, p_message_id uuid, p_head_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1
          FROM convo.path_segments(p_conversation_id, p_head_id) s
          JOIN convo.messages m
            ON m.conversation_id = p_conversation_id AND m.id = p_message_id
         WHERE m.branch_id = s.branch_id AND m.depth <= s.max_depth);
END;
$$;

-- is_retry: recognises a retried write by its client-supplied message id,
-- before any other check. False when the id is new; true when the stored
-- message is the same request (role, parts and, if asked, parent): the caller
-- then returns the first result and writes nothing. CV009 when it differs.
CREATE OR REPLACE FUNCTION convo.is_retry(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_role            text,
    p_parts           jsonb,
    p_parent_id       uuid,
    p_match_parent    boolean)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_message_id IS NULL THEN
        RETURN false;
    END IF;
    SELECT * INTO v_message FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_message.role IS DISTINCT FROM p_role
       OR (p_match_parent AND v_message.parent_id IS DISTINCT FROM p_parent_id)
       OR v_message.parts IS DISTINCT FROM p_parts THEN
        RAISE EXCEPTION 'message id % is already used for a different message', p_message_id
            USING ERRCODE = 'CV009',
                  DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id),
                  HINT = 'A retry must repeat the first call exactly; a new message needs a new id.';
    END IF;
    RETURN true;
END;
$$;

-- lock_conversation: takes the conversation's row lock (FOR NO KEY UPDATE),
-- which every write to a conversation takes first, so writes to one
-- conversation serialize; returns the current head. CV002 if it does not exist.
CREATE OR REPLACE FUNCTION convo.lock_conversation(p_conversation_id uuid)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT c.head_message_id INTO v_head
      FROM convo.conversations c
     WHERE c.id = p_conversation_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_head;
END;
$$;

-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. The API functions name
-- the reason through transaction-local settings (move_head_to); any other
-- UPDATE is logged as 'direct_update' by session_user.
CREATE OR REPLACE FUNCTION convo.log_head_move()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_reason   text := nullif(current_setting('convo.head_reason', true), '');
    v_moved_by text := nullif(current_setting('convo.head_moved_by', true), '');
BEGIN
    IF v_reason IS NULL THEN
        v_reason := 'direct_update';
        v_moved_by := session_user;
    END IF;
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;

-- message_parts_check: every part is well formed for its type and fits its
-- message's role, and is exactly the element of messages.parts it claims to
-- be (so the two never disagree); derives type, tool_call_id and tool_name
-- from the body (CHECK constraints tie them together).
CREATE OR REPLACE FUNCTION convo.message_parts_check()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_msg  convo.messages;
    v_body jsonb := NEW.body;
    v_type text;
    v_where text := format('message %s, part %s', NEW.message_id, NEW.ordinal);
BEGIN
    v_msg := convo.message_ref(NEW.conversation_id, NEW.message_id);
    IF v_msg.parts -> NEW.ordinal IS DISTINCT FROM v_body THEN
        RAISE EXCEPTION 'message parts are written with their message, as convo.messages.parts'
            USING ERRCODE = 'CV005', DETAIL = v_where;
    END IF;
    IF octet_length(v_body::text) > convo.max_part_bytes() THEN
        RAISE EXCEPTION 'a message part is larger than % bytes', convo.max_part_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', v_where, octet_length(v_body::text));
    END IF;
    IF jsonb_typeof(v_body) IS DISTINCT FROM 'object' OR jsonb_typeof(v_body -> 'type') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'a message part must be a JSON object with a string "type"'
            USING ERRCODE = 'CV008', DETAIL = v_where;
    END IF;
    v_type := v_body ->> 'type';
    IF v_type = 'text' THEN
        IF jsonb_typeof(v_body -> 'text') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'a text part needs a string "text"' USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSIF v_type = 'tool_use' THEN
        IF jsonb_typeof(v_body -> 'id') IS DISTINCT FROM 'string' OR v_body ->> 'id' = ''
           OR jsonb_typeof(v_body -> 'name') IS DISTINCT FROM 'string' OR v_body ->> 'name' = ''
           OR jsonb_typeof(v_body -> 'input') IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'a tool_use part needs a non-empty string "id" and "name" and an object "input"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        IF v_msg.role <> 'assistant' THEN
            RAISE EXCEPTION 'tool_use belongs in an assistant message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF octet_length((v_body -> 'input')::text) > convo.max_tool_input_bytes() THEN
            RAISE EXCEPTION 'a tool input is larger than % bytes', convo.max_tool_input_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF EXISTS (SELECT 1 FROM convo.message_parts p
                    WHERE p.conversation_id = NEW.conversation_id
                      AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'id') THEN
            RAISE EXCEPTION 'tool call id % is already used in this conversation', v_body ->> 'id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, conversation %s', v_where, v_body ->> 'id', NEW.conversation_id);
        END IF;
    ELSIF v_type = 'tool_result' THEN
        IF jsonb_typeof(v_body -> 'tool_use_id') IS DISTINCT FROM 'string' OR NOT v_body ? 'content'
           OR (v_body ? 'is_error' AND jsonb_typeof(v_body -> 'is_error') <> 'boolean') THEN
            RAISE EXCEPTION 'a tool_result part needs a string "tool_use_id", a "content" and, if given, a boolean "is_error"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        IF v_msg.role NOT IN ('user', 'tool') THEN
            RAISE EXCEPTION 'tool_result belongs in a user or tool message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = v_where;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM convo.message_parts p
                        WHERE p.conversation_id = NEW.conversation_id AND p.message_id = v_msg.parent_id
                          AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'tool_use_id') THEN
            RAISE EXCEPTION 'tool_result names tool call %, which is not a tool_use of the parent message', v_body ->> 'tool_use_id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, parent %s', v_where, v_body ->> 'tool_use_id', v_msg.parent_id);
        END IF;
    ELSIF v_type = 'attachment' THEN
        IF jsonb_typeof(v_body -> 'uri') IS DISTINCT FROM 'string' OR v_body ->> 'uri' = ''
           OR jsonb_typeof(v_body -> 'media_type') IS DISTINCT FROM 'string' OR v_body ->> 'media_type' = '' THEN
            RAISE EXCEPTION 'an attachment part needs a non-empty string "uri" and "media_type"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown message part type "%"', v_type
            USING ERRCODE = 'CV008', DETAIL = v_where,
                  HINT = 'Part types are text, tool_use, tool_result and attachment.';
    END IF;
    NEW.type := v_type;
    NEW.tool_call_id := CASE v_type WHEN 'tool_use' THEN v_body ->> 'id' WHEN 'tool_result' THEN v_body ->> 'tool_use_id' END;
    NEW.tool_name := CASE v_type WHEN 'tool_use' THEN v_body ->> 'name' END;
    RETURN NEW;
END;
$$;

-- message_ref: the message a call names, in the conversation it names.
-- A message of another conversation is CV003, no such message CV002.
CREATE OR REPLACE FUNCTION convo.message_ref(p_conversation_id uuid, p_message_id uuid)
RETURNS convo.messages
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_message convo.messages;
BEGIN
    IF p_message_id IS NULL THEN
        RAISE EXCEPTION 'a message id is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_message FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id;
    IF FOUND THEN
        RETURN v_message;
    END IF;
    PERFORM convo.raise_not_found('message', p_message_id::text, p_conversation_id,
        (SELECT m.conversation_id FROM convo.messages m WHERE m.id = p_message_id LIMIT 1));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- messages_fill_tree: checks a new message's role and parts and computes its
-- place in the tree (depth, sibling_index, branch_id, created_at) from its
-- parent, whoever inserts it, under the conversation's row lock so that
-- concurrent writers serialize.
CREATE OR REPLACE FUNCTION convo.messages_fill_tree()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_parent convo.messages;
BEGIN
    PERFORM convo.lock_conversation(NEW.conversation_id);
    IF NEW.role IS NULL OR NEW.role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'unknown role %', coalesce(quote_literal(NEW.role), 'NULL')
            USING ERRCODE = 'CV011', HINT = 'Roles are system, user, assistant and tool.';
    END IF;
    PERFORM convo.check_parts(NEW.parts);
    IF NEW.parent_id IS NULL THEN
        NEW.depth := 0;
        SELECT coalesce(max(m.sibling_index), 0) + 1 INTO NEW.sibling_index
          FROM convo.messages m
         WHERE m.conversation_id = NEW.conversation_id AND m.parent_id IS NULL;
        NEW.branch_id := NEW.id;
    ELSE
        v_parent := convo.message_ref(NEW.conversation_id, NEW.parent_id);
        NEW.depth := v_parent.depth + 1;
        SELECT coalesce(max(m.sibling_index), 0) + 1 INTO NEW.sibling_index
          FROM convo.messages m
         WHERE m.conversation_id = NEW.conversation_id AND m.parent_id = NEW.parent_id;
        NEW.branch_id := CASE WHEN NEW.sibling_index = 1 THEN v_parent.branch_id ELSE NEW.id END;
    END IF;
    IF NEW.sibling_index = 1 AND NEW.branch_reason IS NOT NULL THEN
        RAISE EXCEPTION 'a first child has no branch_reason'
            USING ERRCODE = 'CV011',
                  DETAIL = format('message %s, parent %s, branch_reason %s', NEW.id, NEW.parent_id, NEW.branch_reason);
    END IF;
    IF NEW.sibling_index > 1 AND NEW.branch_reason IS NULL THEN
        NEW.branch_reason := 'branch';
    END IF;
    NEW.created_at := clock_timestamp();
    RETURN NEW;
END;
$$;

-- messages_split_parts: writes one message_parts row per element of a new
-- message's parts, in the same statement, so each part is checked on its
-- own and tool calls get their unique index.
CREATE OR REPLACE FUNCTION convo.messages_split_parts()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    INSERT INTO convo.message_parts (conversation_id, message_id, ordinal, body)
    SELECT NEW.conversation_id, NEW.id, e.ordinality - 1, e.part
      FROM jsonb_array_elements(NEW.parts) WITH ORDINALITY AS e(part, ordinality);
    RETURN NULL;
END;
$$;

-- move_head: a branch switch: the head names any message of the conversation.
-- p_reason is free text in lower snake case; 'create' and 'direct_update'
-- are kept for the database's own log rows.
CREATE OR REPLACE FUNCTION convo.move_head(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_reason          text DEFAULT 'switch',
    p_expected_head   uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_reason IS NULL OR p_reason !~ '^[a-z][a-z0-9_]{0,62}$' OR p_reason IN ('create', 'direct_update') THEN
        RAISE EXCEPTION 'invalid head-move reason %', coalesce(quote_literal(p_reason), 'NULL')
            USING ERRCODE = 'CV011',
                  HINT = 'A reason is 1 to 63 characters of a-z, 0-9 and _, starting with a letter; create and direct_update are reserved.';
    END IF;
    v_head := convo.lock_conversation(p_conversation_id);
    PERFORM convo.message_ref(p_conversation_id, p_message_id);
    PERFORM convo.check_expected_head(p_conversation_id, p_expected_head, v_head);
    PERFORM convo.move_head_to(p_conversation_id, p_message_id, p_reason, p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';

-- move_head_to: moves the head and lets log_head_move record why and by whom
-- (through transaction-local settings, cleared again at once so a later
-- direct UPDATE in the same transaction is logged as 'direct_update').
-- Moving the head to where it already is writes nothing.
CREATE OR REPLACE FUNCTION convo.move_head_to(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_reason          text,
    p_moved_by        text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    PERFORM set_config('convo.head_reason', p_reason, true);
    PERFORM set_config('convo.head_moved_by', coalesce(p_moved_by, ''), true);
    UPDATE convo.conversations c
       SET head_message_id = p_message_id
     WHERE c.id = p_conversation_id
       AND c.head_message_id IS DISTINCT FROM p_message_id;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
END;
$$;

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. CV002 for an unknown conversation; empty before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM convo.path_from(p_conversation_id,
                                  (convo.conversation_ref(p_conversation_id)).head_message_id);
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"); empty if there was no head yet.
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
BEGIN
    RETURN QUERY
    SELECT * FROM convo.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at));
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';

-- path_from: the path from the root to p_head_id, depth 0 first: one index
-- range scan (branch_id, depth) per segment from path_segments, reading the
-- stored parts of each message, so it costs close to reading a flat list.
-- sibling_count comes from the few siblings after the first (messages_forks_idx).
CREATE OR REPLACE FUNCTION convo.path_from(p_conversation_id uuid, p_head_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, convo
AS $$
BEGIN
    RETURN QUERY
    WITH forks AS MATERIALIZED (
        SELECT f.parent_id, max(f.sibling_index) AS sibling_count
          FROM convo.messages f
         WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
         GROUP BY f.parent_id
    )
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           coalesce((SELECT f.sibling_count FROM forks f WHERE f.parent_id IS NOT DISTINCT FROM m.parent_id), 1)::int
      FROM convo.path_segments(p_conversation_id, p_head_id) s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
END;
$$;

-- path_segments: the branches that the path from the root to p_head_id runs
-- through, each with the deepest message of it on the path. A branch is a run
-- of first children, so there is one row per branch point on the path (one
-- row for a conversation that never branched): the walk up costs the number
-- of branch points, not the number of messages. PL/pgSQL, so its plan is cached.
CREATE OR REPLACE FUNCTION convo.path_segments(p_conversation_id uuid, p_head_id uuid)
RETURNS TABLE (branch_id uuid, max_depth int)
LANGUAGE plpgsql
STABLE
ROWS 4
SET search_path = pg_catalog, convo
AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE segments (branch_id, max_depth) AS (
        SELECT h.branch_id, h.depth
          FROM convo.messages h
         WHERE h.conversation_id = p_conversation_id AND h.id = p_head_id
        UNION ALL
        SELECT fork.branch_id, fork.depth
          FROM segments s
          JOIN convo.messages start ON start.conversation_id = p_conversation_id AND start.id = s.branch_id
          JOIN convo.messages fork ON fork.conversation_id = p_conversation_id AND fork.id = start.parent_id
    )
    SELECT s.branch_id, s.max_depth FROM segments s;
END;
$$;

-- raise_not_found: the error for an id that names nothing in the
-- conversation a call names: CV003 when it names a row of another
-- conversation (p_other_conversation_id), CV002 when it names none.
CREATE OR REPLACE FUNCTION convo.raise_not_found(
    p_what                  text,
    p_id                    text,
    p_conversation_id       uuid,
    p_other_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF p_other_conversation_id IS NOT NULL THEN
        RAISE EXCEPTION '% % belongs to another conversation', p_what, p_id
            USING ERRCODE = 'CV003',
                  DETAIL = format('%s %s, conversation %s, named in conversation %s',
                                  p_what, p_id, p_other_conversation_id, p_conversation_id);
    END IF;
    RAISE EXCEPTION '% % does not exist', p_what, p_id
        USING ERRCODE = 'CV002', DETAIL = format('%s %s, conversation %s', p_what, p_id, p_conversation_id);
END;
$$;

-- refuse_change: the trigger function behind every append-only table (and
-- any other statement a table refuses).
-- A statement-level BEFORE trigger (ENABLE ALWAYS) so it also stops the table
-- owner, TRUNCATE, and sessions with session_replication_role = replica.
CREATE OR REPLACE FUNCTION convo.refuse_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    -- The trigger's argument, if any, says why the table refuses (default: append-only).
    RAISE EXCEPTION 'convo.% is %: % is not allowed', TG_TABLE_NAME, coalesce(TG_ARGV[0], 'append-only'), TG_OP
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, operation %s, role %s', TG_TABLE_NAME, TG_OP, current_user),
              HINT = 'Nothing in the conversation tree is updated or deleted: insert a sibling or move the head instead.';
END;
$$;

-- edit_and_resend: a user message's sibling (branch_reason 'user_edit'); the
-- head moves to it and the old subtree stays, unchanged, off the path.
CREATE OR REPLACE FUNCTION convo.edit_and_resend(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_new_message_id  uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS uuid
LANGUAGE sql
SET search_path = pg_catalog, convo
RETURN convo.add_sibling(p_conversation_id, p_message_id, p_parts, p_expected_head,
                         p_new_message_id, p_moved_by, 'user', 'user_edit');

COMMENT ON FUNCTION convo.edit_and_resend(uuid, uuid, jsonb, uuid, uuid, text) IS
    'Edit a user message: insert its sibling (branch_reason user_edit) and move the head to it; nothing is updated or deleted.';

-- max_message_bytes: the size cap on the parts of a whole message (4 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_message_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 4194304;

COMMENT ON FUNCTION convo.max_message_bytes() IS 'Size cap in bytes on the parts of a whole message (4 MiB of JSON); larger input raises CV010.';

-- max_metadata_bytes: the size cap on conversation metadata (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_metadata_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_metadata_bytes() IS 'Size cap in bytes on conversation metadata (256 KiB of JSON); larger input raises CV010.';

-- max_part_bytes: the size cap on one message part (1 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_part_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 1048576;

COMMENT ON FUNCTION convo.max_part_bytes() IS 'Size cap in bytes on one message part (1 MiB of JSON); larger input raises CV010.';

-- max_tool_input_bytes: the size cap on one tool_use input (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_tool_input_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_tool_input_bytes() IS 'Size cap in bytes on one tool_use input (256 KiB of JSON); larger input raises CV010.';

-- regenerate: an assistant message's sibling (branch_reason 'regenerate');
-- the head moves to it and the old answer stays as an alternative.
CREATE OR REPLACE FUNCTION convo.regenerate(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_new_message_id  uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS uuid
LANGUAGE sql
SET search_path = pg_catalog, convo
RETURN convo.add_sibling(p_conversation_id, p_message_id, p_parts, p_expected_head,
                         p_new_message_id, p_moved_by, 'assistant', 'regenerate');

COMMENT ON FUNCTION convo.regenerate(uuid, uuid, jsonb, uuid, uuid, text) IS
    'Regenerate an assistant message: insert its sibling (branch_reason regenerate) and move the head to it.';

-- Triggers (current text in sql/triggers/, one per file).

-- conversation_head_log_append_only: convo.conversation_head_log is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER conversation_head_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.conversation_head_log
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_append_only;

-- conversations_guard: id, owner and creation time never change, and a head
-- once set is never unset.
CREATE OR REPLACE TRIGGER conversations_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW EXECUTE FUNCTION convo.conversations_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_guard;

-- conversations_head_log: every change of a head, by any statement (the API
-- or a direct UPDATE by the owner), writes exactly one head-log row in the
-- same transaction. An UPDATE that leaves the head where it is writes none.
CREATE OR REPLACE TRIGGER conversations_head_log
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id)
    EXECUTE FUNCTION convo.log_head_move();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_head_log;

-- conversations_no_delete: a conversation is never deleted (erasure redacts
-- content and keeps the shape), so DELETE and TRUNCATE raise CV005.
CREATE OR REPLACE TRIGGER conversations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.conversations
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_no_delete;

-- message_parts_append_only: convo.message_parts is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER message_parts_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_append_only;

-- message_parts_check: each part is checked (shape, role, tool pairing,
-- size) on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER message_parts_check
    BEFORE INSERT ON convo.message_parts
    FOR EACH ROW EXECUTE FUNCTION convo.message_parts_check();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_check;

-- messages_append_only: convo.messages is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER messages_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT EXECUTE FUNCTION convo.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_append_only;

-- messages_fill_tree: a message's depth, sibling_index and branch_id are
-- computed from its parent on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER messages_fill_tree
    BEFORE INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo.messages_fill_tree();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_fill_tree;

-- messages_split_parts: a message's parts become message_parts rows in the
-- statement that inserts the message.
CREATE OR REPLACE TRIGGER messages_split_parts
    AFTER INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo.messages_split_parts();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_split_parts;
