-- sql/tree/tables.sql: the tables of the tree domain as the migrations (sql/migrations) leave them, read from
-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then
-- run `go run ./cmd/apidocs`, which rewrites this file; a test fails when it is stale, and another builds a database
-- from these files and the object files and compares it with the migrations'. Grants come from
-- convo_private.apply_grants, triggers from their files in triggers/.

CREATE TYPE convo_private.new_message AS (
    id uuid,
    parent_id uuid,
    role text,
    parts jsonb,
    branch_reason text,
    created_at timestamp with time zone,
    incomplete boolean
);
COMMENT ON TYPE convo_private.new_message IS 'A message for write_messages to add: its id, parent (NULL: a root), role, parts, the branch reason asked for, its time (NULL: now) and whether it is an answer cut short.';

CREATE TABLE convo.conversation_head_log (
    conversation_id uuid NOT NULL,
    seq bigint NOT NULL,
    head_message_id uuid NOT NULL,
    previous_head_id uuid,
    moved_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    moved_by text,
    reason text NOT NULL,
    source_seq bigint,
    import_id uuid,
    CONSTRAINT conversation_head_log_pkey PRIMARY KEY (conversation_id, seq),
    CONSTRAINT conversation_head_log_reason_check CHECK (reason ~ '^[a-z][a-z0-9_]{0,62}$'::text)
);
CREATE INDEX conversation_head_log_at_idx ON convo.conversation_head_log USING btree (conversation_id, moved_at, seq);
ALTER TABLE convo.conversation_head_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY conversation_head_log_reader_reads_all ON convo.conversation_head_log AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.conversation_head_log IS 'Every head movement, in the transaction that made it: seq per conversation, the head before and after, who and why; append-only.';

CREATE TABLE convo.conversations (
    id uuid NOT NULL,
    owner_id text NOT NULL,
    head_message_id uuid,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    title text,
    archived boolean DEFAULT false NOT NULL,
    last_activity_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    deleted_at timestamp with time zone,
    erased_at timestamp with time zone,
    CONSTRAINT conversations_pkey PRIMARY KEY (id),
    CONSTRAINT conversations_metadata_check CHECK (jsonb_typeof(metadata) = 'object'::text),
    CONSTRAINT conversations_owner_id_check CHECK (owner_id <> ''::text),
    CONSTRAINT conversations_owner_id_length CHECK (length(owner_id) <= 255),
    CONSTRAINT conversations_title_length CHECK (length(title) <= 1000)
);
CREATE INDEX conversations_due_idx ON convo.conversations USING btree (deleted_at) WHERE ((deleted_at IS NOT NULL) AND (erased_at IS NULL));
CREATE INDEX conversations_owner_idx ON convo.conversations USING btree (owner_id, created_at);
CREATE INDEX conversations_sidebar_idx ON convo.conversations USING btree (owner_id, archived, last_activity_at DESC, id DESC) WHERE ((deleted_at IS NULL) AND (erased_at IS NULL));
ALTER TABLE convo.conversations ENABLE ROW LEVEL SECURITY;
CREATE POLICY conversations_reader_reads_all ON convo.conversations AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.conversations IS 'One conversation: its owner, its head (the live leaf), title, archive state, deletion, first erasure, last activity and metadata; the head, title, archive state and deletion change through the API (a direct UPDATE is logged); never deleted as a row.';

CREATE TABLE convo.keyed_parts (
    conversation_id uuid NOT NULL,
    message_id uuid NOT NULL,
    ordinal integer NOT NULL,
    type text NOT NULL,
    tool_call_id text,
    tool_name text,
    CONSTRAINT keyed_parts_pkey PRIMARY KEY (conversation_id, message_id, ordinal),
    CONSTRAINT keyed_parts_call_check CHECK ((type = ANY (ARRAY['tool_use'::text, 'tool_result'::text])) = (tool_call_id IS NOT NULL)),
    CONSTRAINT keyed_parts_name_check CHECK ((type = 'tool_use'::text) = (tool_name IS NOT NULL)),
    CONSTRAINT keyed_parts_ordinal_check CHECK (ordinal >= 0),
    CONSTRAINT keyed_parts_tool_call_id_length CHECK (length(tool_call_id) <= 255),
    CONSTRAINT keyed_parts_type_check CHECK (type = ANY (ARRAY['tool_use'::text, 'tool_result'::text, 'attachment'::text]))
);
CREATE INDEX keyed_parts_tool_call_idx ON convo.keyed_parts USING btree (tool_call_id) WHERE (type = 'tool_use'::text);
CREATE UNIQUE INDEX keyed_parts_tool_use_key ON convo.keyed_parts USING btree (conversation_id, tool_call_id) WHERE (type = 'tool_use'::text);
ALTER TABLE convo.keyed_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY keyed_parts_reader_reads_all ON convo.keyed_parts AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.keyed_parts IS 'The parts addressed by key (tool calls, tool results, attachments), ids only: the part itself is its message''s; append-only.';

CREATE TABLE convo.live_path (
    conversation_id uuid NOT NULL,
    min_depth integer NOT NULL,
    branch_id uuid NOT NULL,
    max_depth integer NOT NULL,
    CONSTRAINT live_path_pkey PRIMARY KEY (conversation_id, min_depth),
    CONSTRAINT live_path_branch_key UNIQUE (conversation_id, branch_id),
    CONSTRAINT live_path_depths_check CHECK (max_depth >= min_depth),
    CONSTRAINT live_path_min_depth_check CHECK (min_depth >= 0)
);
ALTER TABLE convo.live_path ENABLE ROW LEVEL SECURITY;
CREATE POLICY live_path_reader_reads_all ON convo.live_path AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.live_path IS 'Derived: the segments of each conversation''s live path (branch, first and last depth on the path), kept by every head move; no content.';

CREATE TABLE convo.messages (
    conversation_id uuid NOT NULL,
    id uuid NOT NULL,
    parent_id uuid,
    role text NOT NULL,
    branch_reason text,
    depth integer NOT NULL,
    sibling_index integer NOT NULL,
    branch_id uuid NOT NULL,
    parts jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    import_id uuid,
    incomplete boolean DEFAULT false NOT NULL,
    CONSTRAINT messages_pkey PRIMARY KEY (conversation_id, id),
    CONSTRAINT messages_branch_key UNIQUE (conversation_id, branch_id, depth),
    CONSTRAINT messages_sibling_key UNIQUE NULLS NOT DISTINCT (conversation_id, parent_id, sibling_index),
    CONSTRAINT messages_branch_reason_check CHECK (branch_reason = ANY (ARRAY['user_edit'::text, 'regenerate'::text, 'branch'::text])),
    CONSTRAINT messages_check CHECK ((parent_id IS NULL) = (depth = 0)),
    CONSTRAINT messages_check1 CHECK (parent_id IS DISTINCT FROM id),
    CONSTRAINT messages_check2 CHECK ((sibling_index = 1) = (branch_reason IS NULL)),
    CONSTRAINT messages_check3 CHECK ((branch_id = id) = (parent_id IS NULL OR sibling_index > 1)),
    CONSTRAINT messages_depth_check CHECK (depth >= 0),
    CONSTRAINT messages_incomplete_check CHECK (NOT incomplete OR role = 'assistant'::text AND NOT parts @> '[{"type": "tool_use"}]'::jsonb),
    CONSTRAINT messages_parts_check CHECK (jsonb_typeof(parts) = 'array'::text AND jsonb_array_length(parts) > 0),
    CONSTRAINT messages_role_check CHECK (role = ANY (ARRAY['system'::text, 'user'::text, 'assistant'::text, 'tool'::text])),
    CONSTRAINT messages_sibling_index_check CHECK (sibling_index >= 1)
);
CREATE INDEX messages_forks_idx ON convo.messages USING btree (conversation_id, parent_id, sibling_index) WHERE (sibling_index > 1);
CREATE INDEX messages_id_idx ON convo.messages USING btree (id);
ALTER TABLE convo.messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY messages_reader_reads_all ON convo.messages AS PERMISSIVE FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.messages IS 'The message tree: each message''s parent, depth, sibling position and branch, role and parts; append-only (erasure redacts parts, nothing else changes).';

CREATE TABLE convo_private.owner_holds (
    owner_id text NOT NULL,
    CONSTRAINT owner_holds_pkey PRIMARY KEY (owner_id),
    CONSTRAINT owner_holds_owner_id_check CHECK (owner_id <> ''::text AND length(owner_id) <= 255)
);
COMMENT ON TABLE convo_private.owner_holds IS 'Derived: one row per owner that made a conversation, receipt or import, or was erased; hold_owner locks it (FOR SHARE to make, FOR UPDATE to erase the owner).';

-- Foreign keys, added once every domain's tables exist.

ALTER TABLE convo.conversation_head_log ADD CONSTRAINT conversation_head_log_conversation_id_head_message_id_fkey FOREIGN KEY (conversation_id, head_message_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT conversation_head_log_conversation_id_head_message_id_fkey ON convo.conversation_head_log IS NULL;
ALTER TABLE convo.conversation_head_log ADD CONSTRAINT conversation_head_log_conversation_id_previous_head_id_fkey FOREIGN KEY (conversation_id, previous_head_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT conversation_head_log_conversation_id_previous_head_id_fkey ON convo.conversation_head_log IS NULL;
ALTER TABLE convo.conversation_head_log ADD CONSTRAINT conversation_head_log_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT conversation_head_log_import_fkey ON convo.conversation_head_log IS NULL;

ALTER TABLE convo.conversations ADD CONSTRAINT conversations_head_fkey FOREIGN KEY (id, head_message_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT conversations_head_fkey ON convo.conversations IS NULL;

ALTER TABLE convo.keyed_parts ADD CONSTRAINT keyed_parts_message_fkey FOREIGN KEY (conversation_id, message_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT keyed_parts_message_fkey ON convo.keyed_parts IS NULL;

ALTER TABLE convo.messages ADD CONSTRAINT messages_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES convo.conversations(id);
COMMENT ON CONSTRAINT messages_conversation_id_fkey ON convo.messages IS NULL;
ALTER TABLE convo.messages ADD CONSTRAINT messages_conversation_id_parent_id_fkey FOREIGN KEY (conversation_id, parent_id) REFERENCES convo.messages(conversation_id, id);
COMMENT ON CONSTRAINT messages_conversation_id_parent_id_fkey ON convo.messages IS NULL;
ALTER TABLE convo.messages ADD CONSTRAINT messages_import_fkey FOREIGN KEY (conversation_id, import_id) REFERENCES convo.imports(conversation_id, id);
COMMENT ON CONSTRAINT messages_import_fkey ON convo.messages IS NULL;
