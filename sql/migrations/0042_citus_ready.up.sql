-- 0042_citus_ready: what a Citus cluster needs of the tables and the code,
-- with nothing changed on one server but where the receipts' erasures are
-- recorded: each key holds the column its table is distributed by, each
-- erasure record lives beside what it erased, create_conversation checks
-- and holds the owner apart from making the conversation, and no statement
-- looks a row up across conversations or computes from the rows it updates.
-- From here on migrations create as the migrating role and hand over.

-- Create as the migrating role, never as the owner role convo_owner, which
-- cannot log in (Citus runs DDL on its workers as the current role). A role
-- that is not a superuser becomes a member of convo_owner for this
-- transaction only (it needs CREATEROLE for that), to create in its schemas
-- and hand it what it creates.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
    END IF;
END;
$$;

-- Table changes, written by hand, go here, above the objects that use them.

-- A distributed table's unique keys hold its distribution column: the
-- receipts' the owner's, the imports' source key the conversation's (one
-- source of one owner is one conversation: import_key derives its id).
ALTER TABLE convo.tool_receipts DROP CONSTRAINT tool_receipts_pkey, ADD PRIMARY KEY (owner_id, id);
-- convo_admin names a receipt by its id alone (receipt_ref).
CREATE INDEX tool_receipts_id_idx ON convo.tool_receipts (id);
DROP INDEX convo.imports_source_key;
CREATE UNIQUE INDEX imports_source_key ON convo.imports (owner_id, format, source_key, digest, conversation_id)
    WHERE import_id IS NULL;
-- Folded into hold_new_owner, which create_conversation shares.
DROP FUNCTION convo_private.check_import_owner(text);

-- Each erasure record beside what it erased: a conversation's in
-- convo.erasures and convo.erasure_places, keyed by the conversation; an
-- owner's erasure of its receipts in convo.owner_erasures, keyed by the
-- owner, with the receipts it redacted. erase_owner wrote the latter into
-- convo.erasures with no conversation; those records move, as they were.
CREATE TABLE convo.owner_erasures (
    owner_id          text        NOT NULL CHECK (owner_id <> ''),
    id                uuid        NOT NULL,
    reason            text        NOT NULL CHECK (btrim(reason) <> ''),
    erased_by         text        NOT NULL DEFAULT coalesce(nullif(current_setting('role'), 'none'), session_user),
    erased_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    receipts_redacted bigint      NOT NULL CHECK (receipts_redacted >= 0),
    PRIMARY KEY (owner_id, id)
);
COMMENT ON TABLE convo.owner_erasures IS
    'Each erasure of an owner''s receipts (erase_owner): who, when, why, how many receipts it redacted. Append-only.';
ALTER TABLE convo.owner_erasures ENABLE ROW LEVEL SECURITY;
CREATE POLICY owner_erasures_reader_reads_all ON convo.owner_erasures FOR SELECT TO convo_reader USING (true);

ALTER TABLE convo.erasures DISABLE TRIGGER erasures_90_append_only;
ALTER TABLE convo.erasure_places DISABLE TRIGGER erasure_places_90_append_only;
INSERT INTO convo.owner_erasures (owner_id, id, reason, erased_by, erased_at, receipts_redacted)
SELECT e.owner_id, e.id, e.reason, e.erased_by, e.erased_at, coalesce(p.rows_redacted, 0)
  FROM convo.erasures e
  LEFT JOIN convo.erasure_places p ON p.owner_id = e.owner_id AND p.erasure_id = e.id AND p.place = 'tool_receipts'
 WHERE e.conversation_id IS NULL;
DELETE FROM convo.erasure_places p USING convo.erasures e
 WHERE p.owner_id = e.owner_id AND p.erasure_id = e.id AND e.conversation_id IS NULL;
DELETE FROM convo.erasures WHERE conversation_id IS NULL;
ALTER TABLE convo.erasure_places ADD COLUMN conversation_id uuid;
UPDATE convo.erasure_places p SET conversation_id = e.conversation_id
  FROM convo.erasures e WHERE e.owner_id = p.owner_id AND e.id = p.erasure_id;
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_90_append_only;
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_90_append_only;

ALTER TABLE convo.erasure_places DROP CONSTRAINT erasure_places_owner_id_erasure_id_fkey,
    DROP CONSTRAINT erasure_places_pkey,
    ALTER COLUMN conversation_id SET NOT NULL;
ALTER TABLE convo.erasures DROP CONSTRAINT erasures_pkey,
    ALTER COLUMN conversation_id SET NOT NULL,
    ADD PRIMARY KEY (conversation_id, id);
DROP INDEX convo.erasures_conversation_idx;
ALTER TABLE convo.erasure_places ADD PRIMARY KEY (conversation_id, erasure_id, place),
    ADD CONSTRAINT erasure_places_erasure_fkey FOREIGN KEY (conversation_id, erasure_id)
        REFERENCES convo.erasures (conversation_id, id);
COMMENT ON TABLE convo.erasures IS 'Every erasure of a conversation (who, when, why), a repeat too; append-only.';

-- begin_receipt: the receipt row first, in pending, before the model fills
-- any argument: one allowlisted tool, its version frozen here. A repeat with
-- the same owner and key returns the first row (created = false); the same
-- key with another tool or request raises CV009. A key whose receipt was
-- erased (erase_owner emptied its request and its digest) raises CV009 for
-- any request, in words that name no request: nothing is compared with a
-- guess. A convo_app session files receipts only for the owner it set
-- (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.begin_receipt(
    p_owner_id        text,
    p_idempotency_key text,
    p_tool_name       text,
    p_request         jsonb DEFAULT '{}')
RETURNS TABLE (receipt_id uuid, status text, http_status int, error_code text, result_ref text, created boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_tool    convo.tools;
    v_digest  text;
    v_receipt convo.tool_receipts;
    v_now     timestamptz;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' OR p_request IS NULL OR p_tool_name IS NULL THEN
        RAISE EXCEPTION 'p_owner_id, p_tool_name and p_request are required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, tool %s, key %s', coalesce(p_owner_id, 'NULL'),
                                                     coalesce(p_tool_name, 'NULL'), coalesce(p_idempotency_key, 'NULL'));
    END IF;
    PERFORM convo_private.check_owner(p_owner_id, 'create receipts');
    -- Held against an owner-wide erasure running meanwhile (hold_owner).
    PERFORM convo_private.hold_owner(p_owner_id, false);
    IF p_idempotency_key IS NULL OR length(p_idempotency_key) NOT BETWEEN 8 AND 255 THEN
        RAISE EXCEPTION 'an idempotency key is 8 to 255 characters'
            USING ERRCODE = 'CV011', DETAIL = format('key %s', coalesce(quote_literal(p_idempotency_key), 'NULL'));
    END IF;
    PERFORM convo_private.check_size('p_request', p_request, convo.max_request_bytes());
    -- Keyed (keyed_digest): the digest outlives an erasure of the request.
    v_digest := convo_private.keyed_digest(encode(sha256(convert_to(p_request::text, 'UTF8')), 'hex'));

    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    IF NOT FOUND THEN
        v_tool := convo_private.tool_ref(p_tool_name);
        v_now := clock_timestamp();
        INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest,
                                         created_at, deadline_at)
        VALUES (gen_random_uuid(), p_owner_id, p_idempotency_key, v_tool.name, v_tool.version, p_request, v_digest,
                v_now, v_now + v_tool.deadline)
        ON CONFLICT (owner_id, idempotency_key) DO NOTHING
        RETURNING * INTO v_receipt;
        IF FOUND THEN
            PERFORM convo_private.notify_receipt(v_receipt.id, 'pending', false);
            RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                                v_receipt.result_ref, true;
            RETURN;
        END IF;
        -- Another transaction filed the same key first: answer as a repeat.
        SELECT * INTO v_receipt FROM convo.tool_receipts r
         WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    END IF;
    IF v_receipt.request_digest IS NULL THEN
        RAISE EXCEPTION 'idempotency key % belongs to an erased request; use a new key', p_idempotency_key
            USING ERRCODE = 'CV009',
                  DETAIL = format('receipt %s, owner %s, erased', v_receipt.id, p_owner_id),
                  HINT = 'A receipt''s request is not compared with anything once erased: file the request again under a new key.';
    END IF;
    IF v_receipt.tool_name <> p_tool_name OR v_receipt.request_digest <> v_digest THEN
        RAISE EXCEPTION 'idempotency key % is already used for a different request', p_idempotency_key
            USING ERRCODE = 'CV009',
                  DETAIL = format('receipt %s, owner %s, tool %s', v_receipt.id, p_owner_id, v_receipt.tool_name);
    END IF;
    RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                        v_receipt.result_ref, false;
END;
$$;

COMMENT ON FUNCTION convo.begin_receipt(text, text, text, jsonb) IS
    'File a receipt (pending) before a route-initiated mutation; a repeat of the key returns the first row (CV009 once its request was erased).';

-- conversations: an owner's conversations for a sidebar, latest activity
-- first (ties by id, descending), p_limit at a time (1 to 1,000), archived
-- ones only with p_archived. Keyset-paged: pass the last row's
-- last_activity_at and conversation_id as p_before and p_before_id for the
-- next page, so no conversation is skipped or repeated between pages even
-- when many share one time (an import); p_before alone means strictly
-- older. One range scan of conversations_sidebar_idx. A convo_app session
-- lists only the owner it set (CV011 for another); convo_reader any.
-- last_activity_at is the time of the conversation's last head move through
-- the API (a message that became the head, or a switch to another branch;
-- an import's: its latest message's original time, when it has one).
CREATE OR REPLACE FUNCTION convo.conversations(
    p_owner_id  text,
    p_limit     int DEFAULT 50,
    p_before    timestamptz DEFAULT NULL,
    p_archived  boolean DEFAULT false,
    p_before_id uuid DEFAULT NULL)
RETURNS TABLE (conversation_id uuid, title text, created_at timestamptz, last_activity_at timestamptz,
               head_message_id uuid, archived boolean)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    PERFORM convo_private.check_sidebar(p_owner_id, p_limit, p_before, p_archived, p_before_id);
    IF p_before IS NULL THEN
        RETURN QUERY
        SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
          FROM convo.conversations c
         WHERE c.owner_id = p_owner_id AND c.archived = p_archived
         ORDER BY c.last_activity_at DESC, c.id DESC
         LIMIT p_limit;
    ELSIF p_before_id IS NULL THEN
        RETURN QUERY
        SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
          FROM convo.conversations c
         WHERE c.owner_id = p_owner_id AND c.archived = p_archived AND c.last_activity_at < p_before
         ORDER BY c.last_activity_at DESC, c.id DESC
         LIMIT p_limit;
    ELSE
        RETURN QUERY
        SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
          FROM convo.conversations c
         WHERE c.owner_id = p_owner_id AND c.archived = p_archived
           AND (c.last_activity_at, c.id) < (p_before, p_before_id)
         ORDER BY c.last_activity_at DESC, c.id DESC
         LIMIT p_limit;
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.conversations(text, integer, timestamp with time zone, boolean, uuid) IS
    'An owner''s conversations, latest activity first, keyset-paged (p_before, p_before_id: the last row of the previous page): a chat sidebar.';

-- create_conversation: a new conversation; with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
-- Retry-safe through p_conversation_id: the same call returns the same id.
-- A convo_app session creates only for the owner it set (CV011 otherwise):
-- hold_new_owner, then new_conversation, each on its own key's node on a
-- distributed database.
CREATE OR REPLACE FUNCTION convo.create_conversation(
    p_owner_id        text,
    p_system_prompt   text DEFAULT NULL,
    p_metadata        jsonb DEFAULT '{}',
    p_conversation_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'create conversations');
    RETURN convo_private.new_conversation(coalesce(p_conversation_id, gen_random_uuid()), p_owner_id,
                                          p_system_prompt, p_metadata, p_conversation_id IS NOT NULL);
END;
$$;

COMMENT ON FUNCTION convo.create_conversation(text, text, jsonb, uuid) IS
    'New conversation for an owner; a system prompt becomes the root message and the head. Retry-safe by p_conversation_id.';

-- effect_for_call: what the agent loop must do for a tool call, read from the
-- ledger decision written when the call was appended: execute (send with
-- idempotency_key), reuse (take the existing outcome), confirm (ask a
-- person), rejected, or replay (a registered tool without effects). A call
-- of a tool that was not registered then is CV007, whatever came after.
CREATE OR REPLACE FUNCTION convo.effect_for_call(p_conversation_id uuid, p_tool_call_id text)
RETURNS TABLE (effect_id uuid, decision text, state text, idempotency_key text, external_ref text,
               http_status int, error_code text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_tool_name text;
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    IF p_tool_call_id IS NULL THEN
        RAISE EXCEPTION 'p_tool_call_id is required' USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT p.tool_name INTO v_tool_name FROM convo.keyed_parts p
     WHERE p.conversation_id = p_conversation_id AND p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id;
    IF NOT FOUND THEN
        PERFORM convo_private.raise_not_found('tool call', p_tool_call_id, p_conversation_id,
            convo_private.other_conversation(p_conversation_id, 'convo.keyed_parts', 'tool_call_id', p_tool_call_id,
                                             'type = ''tool_use'''));
    END IF;

    RETURN QUERY
    SELECT e.id, l.decision, e.state, e.idempotency_key, e.external_ref, e.http_status, e.error_code
      FROM convo.tool_effect_calls l
      LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
     WHERE l.conversation_id = p_conversation_id AND l.tool_call_id = p_tool_call_id;
    IF FOUND THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'tool % of call % was not on the allowlist when the call was appended',
            v_tool_name, p_tool_call_id
        USING ERRCODE = 'CV007',
              DETAIL = format('tool %s, tool call %s, conversation %s', v_tool_name, p_tool_call_id, p_conversation_id),
              HINT = 'An unregistered tool never gets a go-ahead; register it, then append a new call.';
END;
$$;

COMMENT ON FUNCTION convo.effect_for_call(uuid, text) IS
    'What the agent loop must do for a tool call: execute, reuse, confirm, rejected or replay (CV007 for an unregistered tool).';

-- erase_owner: erase_conversation for every conversation of an owner, and
-- the owner's receipts (request, arguments, expected values), in one
-- transaction; each conversation's erasure and the receipts' are recorded
-- on their own. An owner with nothing stored is not an error. It holds the
-- owner exclusive first (hold_owner), so it waits for every open transaction
-- that made a conversation, receipt or import of the owner's and nothing new
-- is made meanwhile, then locks and erases exactly the conversations it
-- listed. convo_admin's;
-- the caller (convo_private.caller, not a SECURITY DEFINER helper's owner)
-- must be one that may write for the owner, else CV011.
CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_ids uuid[];
    v_id  uuid;
BEGIN
    PERFORM convo_private.check_erase_owner(p_owner_id, p_reason);
    PERFORM convo_private.hold_owner(p_owner_id, true);
    -- Lock the owner's conversations in one order, each by its key, as every
    -- writer would, and erase exactly those.
    SELECT array_agg(c.id ORDER BY c.id) INTO v_ids FROM convo.conversations c WHERE c.owner_id = p_owner_id;
    FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
    END LOOP;
    RETURN QUERY
    SELECT e.place, sum(e.rows_redacted)::bigint
      FROM (SELECT x.* FROM unnest(v_ids) AS c (id)
                  CROSS JOIN LATERAL convo_private.erase_content(p_owner_id, c.id, p_reason) x
            UNION ALL
            SELECT y.* FROM convo_private.erase_content(p_owner_id, NULL, p_reason) y) e
     GROUP BY e.place
     ORDER BY e.place;
END;
$$;

COMMENT ON FUNCTION convo.erase_owner(text, text) IS
    'Erase the content of every conversation and receipt of an owner, keeping their shape; recorded with p_reason.';

-- expire_receipts: the sweeper: pending receipts past their tool's deadline
-- fail with 504 deadline_exceeded, so none stays pending forever. Returns
-- how many it failed.
CREATE OR REPLACE FUNCTION convo.expire_receipts(p_now timestamptz DEFAULT clock_timestamp())
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'p_now is required' USING ERRCODE = 'CV011', DETAIL = 'p_now NULL';
    END IF;
    RETURN convo_private.expire_receipts_in('convo.tool_receipts', p_now);
END;
$$;

COMMENT ON FUNCTION convo.expire_receipts(timestamptz) IS
    'Fail pending receipts past their tool''s deadline with 504 deadline_exceeded; returns the count.';

-- import_chatgpt: one conversation of a ChatGPT export (an element of
-- conversations.json, or a bare conversation object) as a new conversation
-- of p_owner_id, by the rules of docs/importing.md ("The rules"): the whole tree with
-- its original times, current_node as the head (head-log reason 'import'),
-- each source node kept verbatim in import_origins, tool calls as tool_use
-- and tool_result parts where they pair, no ledger rows. The id is derived
-- from the owner and the source id, so a repeat of the same import returns
-- it and writes nothing; the same source with other content is merged into
-- it (import_tree: the messages not there yet, in any order the same).
-- Malformed input is CV011 naming the node, and nothing is written.
CREATE OR REPLACE FUNCTION convo.import_chatgpt(p_owner_id text, p_conversation jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_mapping jsonb := p_conversation -> 'mapping';
    v_current jsonb := p_conversation -> 'current_node';
    v_source  text;
    v_id      uuid;
    v_digest  text;
    v_existing uuid;
    v_where   text;
    v_bad     record;
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'import conversations');
    IF p_conversation IS NULL OR jsonb_typeof(p_conversation) <> 'object' THEN
        RAISE EXCEPTION 'p_conversation must be one ChatGPT conversation, a JSON object, not %',
                coalesce(jsonb_typeof(p_conversation), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each element of conversations.json on its own.';
    END IF;
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('chatgpt', 'ChatGPT conversation', p_owner_id,
                                    coalesce(convo_private.nonempty_text(p_conversation -> 'conversation_id'),
                                             convo_private.nonempty_text(p_conversation -> 'id')), p_conversation) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'chatgpt', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
    END IF;

    IF jsonb_typeof(v_mapping) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a ChatGPT conversation needs a "mapping" object, not %', coalesce(jsonb_typeof(v_mapping), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    -- The refusals of docs/importing.md, "Input and refusals", first node by
    -- key (bytewise) first.
    SELECT e.key, e.why INTO v_bad
      FROM (SELECT n.key, CASE
                   WHEN jsonb_typeof(n.node) <> 'object' THEN 'is not an object'
                   WHEN jsonb_typeof(n.node -> 'id') NOT IN ('null') AND n.node -> 'id' <> to_jsonb(n.key)
                       THEN 'has an id other than its key'
                   WHEN jsonb_typeof(n.node -> 'parent') NOT IN ('string', 'null')
                       THEN 'has a parent that is neither a string nor null'
                   WHEN jsonb_typeof(n.node -> 'parent') = 'string' AND NOT v_mapping ? (n.node ->> 'parent')
                       THEN 'names a parent that is not in the mapping (missing parent)'
                   WHEN jsonb_typeof(n.node -> 'children') NOT IN ('array', 'null')
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.node -> 'children') = 'array'
                                                                           THEN n.node -> 'children' END) c (child)
                                    WHERE jsonb_typeof(c.child) <> 'string')
                       THEN 'has children that are not an array of strings'
                   WHEN jsonb_typeof(n.node -> 'message') NOT IN ('object', 'null')
                       THEN 'has a message that is neither an object nor null'
                   WHEN jsonb_typeof(n.node -> 'message') IS DISTINCT FROM 'object' THEN NULL
                   WHEN (n.node -> 'message' -> 'author' ->> 'role') IS NULL
                        OR jsonb_typeof(n.node -> 'message' -> 'author' -> 'role') <> 'string'
                        OR n.node -> 'message' -> 'author' ->> 'role' NOT IN ('system', 'user', 'assistant', 'tool')
                       THEN 'has a missing or unknown author.role'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'author' -> 'name') NOT IN ('string', 'null')
                       THEN 'has an author.name that is neither a string nor null'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'content' -> 'content_type') IS DISTINCT FROM 'string'
                       THEN 'has no content, or a content_type that is not a string'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'create_time') NOT IN ('number', 'null')
                       THEN 'has a create_time that is neither a number nor null'
                   WHEN jsonb_typeof(n.node -> 'message' -> 'create_time') = 'number'
                        AND convo_private.epoch_time(n.node -> 'message' -> 'create_time', NULL) IS NULL
                       THEN 'has a create_time outside years 1 to 9999'
                   END AS why
              FROM jsonb_each(v_mapping) AS n (key, node)) e
     WHERE e.why IS NOT NULL
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ChatGPT node % %', v_bad.key, v_bad.why
            USING ERRCODE = 'CV011', DETAIL = format('%s, node %s', v_where, v_bad.key);
    END IF;
    IF jsonb_typeof(v_current) IS DISTINCT FROM 'null' AND v_current IS NOT NULL
       AND (jsonb_typeof(v_current) <> 'string' OR NOT v_mapping ? (v_current #>> '{}')) THEN
        RAISE EXCEPTION 'current_node names no node of the mapping'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, current_node %s', v_where, left(v_current::text, convo_private.max_id_length()));
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'chatgpt', v_source, v_digest, v_mapping,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        convo_private.epoch_time(p_conversation -> 'create_time', NULL),
        jsonb_build_object('format', 'chatgpt', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'mapping', 'requested_head', coalesce(v_current, 'null')),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_chatgpt(text, jsonb) IS
    'Import one ChatGPT conversation (the whole tree, original times, current_node as the head); a repeat returns the same id.';

-- import_conversation: restores an export (export_conversation's document,
-- version 3, or version 2, read as version 3 with no title, not archived, no
-- changes and its latest message's time as its last activity) into this database: a DBA's operation, convo_admin's, for
-- moving or restoring a conversation between databases. The document is
-- accepted only when every row is one the API could have written: its
-- shape and times (restore_problem) before anything is written, its ledger
-- (ledger_problems) once the tree is in; anything else is CV011 naming the
-- key and the row, and nothing is written. Ids, times, reasons, states and
-- who-columns are kept as data; what the database assigns is assigned anew:
-- head-log and event seq are numbered here in the document's order (its
-- numbers kept beside, as source_seq), and a restored effect's scope key is
-- computed under this database's secret (its idempotency key, which may
-- have been sent, is kept). The restore is recorded in convo.imports (who:
-- the caller; when; the document's keyed digest), and every row it writes
-- names that record (import_id), so a restored row is told from one
-- written here. The tree goes in through write_messages, the rest as the
-- document has it, once checked. A repeat is a no-op returning the id,
-- also when it waited for the first to commit (a retry); the id with other
-- content is CV009.
CREATE OR REPLACE FUNCTION convo.import_conversation(p_owner_id text, p_export jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
DECLARE
    v_keys      text[] := ARRAY['format', 'version', 'conversation', 'messages', 'head_log', 'changes', 'generations',
                                'tools', 'tool_calls', 'effects', 'effect_events', 'erasures', 'origins', 'imports'];
    -- What the database assigns, and so what a restore does not read back as given.
    v_assigned  constant text[] := ARRAY['seq', 'source_seq', 'import_id', 'scope_key', 'idempotency_key'];
    v_now       timestamptz := clock_timestamp();
    v_import    uuid := gen_random_uuid();
    v_key       text;
    v_conv      jsonb;
    v_id        uuid;
    v_digest    text;
    v_problem   text;
    v_stored    jsonb;
    v_ids       uuid[];
    v_parents   uuid[];
    v_roles     text[];
    v_parts     jsonb[];
    v_reasons   text[];
    v_times     timestamptz[];
    v_state     text;
    v_table     text;
    v_constraint text;
    v_column    text;
    v_message   text;
    v_detail    text;
    v_check     text;
    v_row       text;
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'import conversations');

    -- The envelope: format, version, exactly the keys of its version.
    IF p_export IS NULL OR jsonb_typeof(p_export) <> 'object' THEN
        RAISE EXCEPTION 'p_export must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, p_export %s', p_owner_id, coalesce(jsonb_typeof(p_export), 'NULL'));
    END IF;
    IF p_export -> 'format' IS DISTINCT FROM '"pgconvo.export"' OR p_export -> 'version' NOT IN ('2', '3')
       OR p_export -> 'version' IS NULL THEN
        RAISE EXCEPTION 'not a pgconvo export of version 2 or 3'
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, format %s, version %s', p_owner_id,
                                  coalesce((p_export -> 'format')::text, 'missing'), coalesce((p_export -> 'version')::text, 'missing')),
                  HINT = CASE WHEN p_export -> 'version' = '1'
                              THEN 'Version 1 exports lack what a restore checks (the tool version of each call): migrate the source database and export again.'
                              ELSE 'import_conversation reads what export_conversation writes: {"format": "pgconvo.export", "version": 3, ...}.' END;
    END IF;
    IF p_export -> 'version' = '2' THEN
        v_keys := array_remove(v_keys, 'changes');
    END IF;
    FOREACH v_key IN ARRAY v_keys LOOP
        IF NOT p_export ? v_key THEN
            RAISE EXCEPTION 'the export has no key "%"', v_key
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, missing key %s', p_owner_id, v_key);
        END IF;
        IF jsonb_typeof(p_export -> v_key) <> (CASE v_key WHEN 'format' THEN 'string' WHEN 'version' THEN 'number'
                                                        WHEN 'conversation' THEN 'object' ELSE 'array' END) THEN
            RAISE EXCEPTION 'the export''s "%" is a JSON %', v_key, jsonb_typeof(p_export -> v_key)
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, key %s', p_owner_id, v_key);
        END IF;
    END LOOP;
    SELECT k INTO v_key FROM jsonb_object_keys(p_export) k WHERE k <> ALL (v_keys) ORDER BY k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the export has an unknown key "%"', v_key
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, unknown key %s', p_owner_id, v_key);
    END IF;
    v_conv := p_export -> 'conversation';
    IF jsonb_typeof(v_conv -> 'id') IS DISTINCT FROM 'string'
       OR v_conv ->> 'id' !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'the export''s conversation has no uuid "id"'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, key conversation.id', p_owner_id);
    END IF;
    v_id := (v_conv ->> 'id')::uuid;
    IF v_conv -> 'owner_id' IS DISTINCT FROM to_jsonb(p_owner_id) THEN
        RAISE EXCEPTION 'the export belongs to another owner'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, owner %s', v_id, p_owner_id);
    END IF;
    v_digest := convo_private.keyed_digest(encode(sha256(convert_to(p_export::text, 'UTF8')), 'hex'));

    BEGIN
        -- Version 2 had no title, archive state or change log: it is read
        -- as version 3 with none, its last activity its latest message's time.
        IF p_export -> 'version' = '2' THEN
            v_conv := v_conv || jsonb_build_object('title', NULL, 'archived', false, 'last_activity_at',
                (SELECT max(t) FROM (SELECT (v_conv ->> 'created_at')::timestamptz
                                     UNION ALL
                                     SELECT (e.elem ->> 'created_at')::timestamptz
                                       FROM jsonb_array_elements(p_export -> 'messages') AS e (elem)) AS x (t)));
            p_export := p_export || jsonb_build_object('version', 3, 'changes', '[]'::jsonb, 'conversation', v_conv);
            v_keys := array_append(v_keys, 'changes');
        END IF;
        IF jsonb_typeof(v_conv -> 'archived') IS DISTINCT FROM 'boolean' THEN
            RAISE EXCEPTION 'the export''s conversation has no boolean "archived"'
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, key conversation.archived', v_id);
        END IF;
        -- A repeat, recognised by the id before any other check, and read
        -- without a lock (another owner's row is never locked or waited
        -- for): the same document restored here before (its digest), or a
        -- conversation of this database that exports to exactly it, returns
        -- the id and writes nothing; anything else under that id is CV009.
        IF EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = v_id) THEN
            IF convo_private.restore_repeat(p_owner_id, v_id, v_digest, p_export) THEN
                RETURN v_id;
            END IF;
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        IF octet_length((v_conv -> 'metadata')::text) > convo.max_metadata_bytes() THEN
            RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('conversation %s: %s bytes', v_id, octet_length((v_conv -> 'metadata')::text));
        END IF;

        -- A history this database could have written, or CV011 naming the
        -- first row that is not (restore_problem), before anything is written.
        v_problem := convo_private.restore_problem(p_owner_id, p_export, v_now);
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export is not a history the API could have written: %', v_problem
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, %s', v_id, v_problem);
        END IF;
        -- The tool versions its effects were checked against are this
        -- database's too: an import never adds to the allowlist (the DBA's).
        SELECT format('tool %s version %s', x.name, x.version) INTO v_problem
          FROM jsonb_array_elements(p_export -> 'tools') AS j (tool)
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tools, j.tool) AS x
          LEFT JOIN convo.tools t ON t.name = x.name AND t.version = x.version
         WHERE t.name IS NULL OR (to_jsonb(t) - 'registered_at' - 'registered_by')::text IS DISTINCT FROM j.tool::text
         LIMIT 1;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export''s % is not registered here with the same settings', v_problem
                USING ERRCODE = 'CV007', DETAIL = format('conversation %s, %s', v_id, v_problem),
                      HINT = 'Register the tool versions the export lists (convo.register_tool) before importing.';
        END IF;

        INSERT INTO convo.conversations (id, owner_id, metadata, created_at, title, archived, last_activity_at)
        VALUES (v_id, p_owner_id, v_conv -> 'metadata', (v_conv ->> 'created_at')::timestamptz, v_conv ->> 'title',
                (v_conv ->> 'archived')::boolean, (v_conv ->> 'last_activity_at')::timestamptz)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            -- The insert waited for another session's restore under this
            -- id, now committed: a retry of the same document (its digest
            -- on record) is a repeat, as above, and writes nothing.
            IF convo_private.restore_repeat(p_owner_id, v_id, v_digest, p_export) THEN
                RETURN v_id;
            END IF;
            RAISE EXCEPTION 'conversation id % was taken meanwhile', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        -- The restore's record, and the document's own records of imports,
        -- kept as restored rows.
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
        VALUES (v_id, v_import, p_owner_id, 'pgconvo', NULL, v_digest);
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest, imported_by, imported_at, import_id)
        SELECT v_id, i.id, i.owner_id, i.format, i.source_key, i.digest, i.imported_by, i.imported_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.imports, p_export -> 'imports') i;

        -- Origins first (their foreign key to the message is deferred), then
        -- the tree through write_messages: parents first, siblings in order,
        -- with their times and the restore's record (so no ledger decision:
        -- the document's are restored below); the head does not move there,
        -- its log is the document's.
        INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
        SELECT v_id, o.message_id, o.source, o.node_key, o.node
          FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins') o;
        SELECT array_agg(m.id ORDER BY m.depth, m.sibling_index), array_agg(m.parent_id ORDER BY m.depth, m.sibling_index),
               array_agg(m.role ORDER BY m.depth, m.sibling_index), array_agg(m.parts ORDER BY m.depth, m.sibling_index),
               array_agg(m.branch_reason ORDER BY m.depth, m.sibling_index),
               array_agg(m.created_at ORDER BY m.depth, m.sibling_index)
          INTO v_ids, v_parents, v_roles, v_parts, v_reasons, v_times
          FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m;
        PERFORM convo_private.write_messages(v_id, NULL, v_ids, v_parents, v_roles, v_parts, v_reasons, v_times,
                                             v_import, NULL, NULL, NULL);

        -- The head log, numbered here from 1 in the document's order, the
        -- head where it ends, and the live path to it.
        INSERT INTO convo.conversation_head_log
            (conversation_id, seq, head_message_id, previous_head_id, moved_at, moved_by, reason, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY l.seq), l.head_message_id, l.previous_head_id, l.moved_at, l.moved_by,
               l.reason, l.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.conversation_head_log, p_export -> 'head_log') l;
        IF v_conv ->> 'head_message_id' IS NOT NULL THEN
            UPDATE convo.conversations c SET head_message_id = (v_conv ->> 'head_message_id')::uuid WHERE c.id = v_id;
            PERFORM convo_private.move_live_path(v_id, (v_conv ->> 'head_message_id')::uuid);
        END IF;
        -- The change log (title, archive state), numbered here the same way.
        INSERT INTO convo.conversation_changes
            (conversation_id, seq, field, old_value, new_value, changed_at, changed_by, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY x.seq), x.field, x.old_value, x.new_value, x.changed_at, x.changed_by,
               x.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.conversation_changes, p_export -> 'changes') x;

        -- Generations as they stand.
        INSERT INTO convo.generations
        SELECT r.* FROM jsonb_array_elements(p_export -> 'generations') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.generations,
                                             j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import)) r;

        -- The record of earlier erasures, recorded by this transaction
        -- (before the effects, whose key epochs count them).
        INSERT INTO convo.erasures (owner_id, id, conversation_id, reason, erased_by, erased_at, import_id)
        SELECT r.owner_id, r.id, v_id, r.reason, r.erased_by, r.erased_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.erasures, p_export -> 'erasures') r;
        INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted, conversation_id)
        SELECT j.elem ->> 'owner_id', (j.elem ->> 'id')::uuid, p.place, p.rows_redacted, v_id
          FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
               LATERAL jsonb_to_recordset(j.elem -> 'places') p (place text, rows_redacted bigint);

        -- Effects as they stand (their event chains were checked above). The
        -- scope key is computed here (scope_key, this database's secret)
        -- from the creating call's input in the effect's key epoch
        -- (key_epoch: the document's erasures, written above, by its
        -- requested_at). Where erasure left no input, the key
        -- is 'erased:' and the effect's id, which no call's key can be: the
        -- document's, made under another secret, cannot be checked here,
        -- and a planted one would be matched by a later call. The
        -- idempotency key is the document's, which may have been sent,
        -- except where nothing was sent (awaiting confirmation, rejected),
        -- where it is the scope key.
        INSERT INTO convo.tool_effects
        SELECT r.*
          FROM jsonb_array_elements(p_export -> 'effects') j (elem)
          LEFT JOIN (SELECT k.effect_id, k.decision,
                            convo_private.scope_key(CASE WHEN k.decision = 'rejected' THEN 'rejected' ELSE t.idempotency_scope END,
                                                    v_id, k.tool_call_id, k.fork_point_id, k.tool_name, m.parts -> k.ordinal -> 'input',
                                                    convo_private.key_epoch(v_id, e.requested_at))
                                AS scope_key
                       FROM jsonb_populate_recordset(NULL::convo.tool_effect_calls, p_export -> 'tool_calls') k
                       JOIN jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m ON m.id = k.message_id
                       JOIN convo.tools t ON t.name = k.tool_name AND t.version = k.tool_version
                       JOIN jsonb_populate_recordset(NULL::convo.tool_effects, p_export -> 'effects') e ON e.id = k.effect_id
                      WHERE k.decision IN ('execute', 'confirm', 'rejected')
                        AND (m.parts -> k.ordinal)::text <> convo_private.redact_part(m.parts -> k.ordinal)::text) q
            ON q.effect_id::text = j.elem ->> 'id'
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tool_effects,
              j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import,
                                           'scope_key', coalesce(q.scope_key, 'erased:' || (j.elem ->> 'id')))
                    || CASE WHEN j.elem ->> 'state' = 'awaiting_confirmation' OR q.decision = 'rejected'
                            THEN jsonb_build_object('idempotency_key', coalesce(q.scope_key, 'erased:' || (j.elem ->> 'id')))
                            ELSE '{}' END) r;

        INSERT INTO convo.tool_effect_calls
        SELECT r.* FROM jsonb_array_elements(p_export -> 'tool_calls') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.tool_effect_calls,
                                             j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import)) r;
        -- The event log, numbered here from 1 in the document's order.
        INSERT INTO convo.tool_effect_events
            (conversation_id, seq, effect_id, from_state, to_state, actor, evidence, at, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY v.seq), v.effect_id, v.from_state, v.to_state, v.actor, v.evidence, v.at,
               v.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v;

        -- The ledger is one the API could have written (ledger_problems):
        -- decisions that follow from the tool versions, links within a
        -- scope, amounts from the arguments.
        SELECT p.row_name || ': ' || p.problem INTO v_problem FROM convo_private.ledger_problems(v_id) p
         ORDER BY p.row_name, p.problem LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the export is not a history the API could have written: %', v_problem
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, %s', v_id, v_problem);
        END IF;

        -- What is stored exports back to the input but for what the
        -- database assigned (v_assigned; an idempotency key is kept or is
        -- the new scope key, as above) and the restore's own record: no key
        -- ignored, no value changed (a derived column, a time, a number's
        -- text).
        SELECT k INTO v_key
          FROM (SELECT convo_private.export_of(v_id) AS stored) s, unnest(v_keys) k
         WHERE (SELECT coalesce(jsonb_agg(r.elem - v_assigned ORDER BY r.n), '[]')
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(s.stored -> k) = 'array' THEN s.stored -> k END)
                       WITH ORDINALITY r (elem, n)
                 WHERE NOT (k = 'imports' AND r.elem ->> 'id' = v_import::text))::text
               IS DISTINCT FROM
               (SELECT coalesce(jsonb_agg(r.elem - v_assigned ORDER BY r.n), '[]')
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_export -> k) = 'array' THEN p_export -> k END)
                       WITH ORDINALITY r (elem, n))::text
            OR (jsonb_typeof(p_export -> k) <> 'array' AND (s.stored -> k)::text IS DISTINCT FROM (p_export -> k)::text)
         ORDER BY array_position(v_keys, k) LIMIT 1;
        IF FOUND THEN
            -- Which row (by its place and id, seq or key in the document)
            -- and which of its fields, so that a large document's fault is
            -- found: one pass over the key's rows.
            v_stored := convo_private.export_of(v_id);
            SELECT format('row %s of the array%s, field %s', x.n, coalesce(' (' || x.name || ')', ''), coalesce(x.field, 'the row'))
              INTO v_problem
              FROM (SELECT coalesce(g.n, s.n) AS n,
                           convo_private.export_row_name(g.raw) AS name,
                           (SELECT f.k FROM (SELECT jsonb_object_keys(g.elem) UNION SELECT jsonb_object_keys(s.elem)) f (k)
                             WHERE (g.elem -> f.k)::text IS DISTINCT FROM (s.elem -> f.k)::text ORDER BY f.k LIMIT 1) AS field
                      FROM (SELECT r.elem AS raw, r.elem - v_assigned AS elem, r.n
                              FROM jsonb_array_elements(p_export -> v_key) WITH ORDINALITY r (elem, n)) g
                      FULL JOIN (SELECT r.elem - v_assigned AS elem, row_number() OVER (ORDER BY r.n) AS n
                                   FROM jsonb_array_elements(v_stored -> v_key) WITH ORDINALITY r (elem, n)
                                  WHERE NOT (v_key = 'imports' AND r.elem ->> 'id' = v_import::text)) s ON s.n = g.n
                     WHERE g.elem::text IS DISTINCT FROM s.elem::text
                     ORDER BY 1 LIMIT 1) x
             WHERE jsonb_typeof(p_export -> v_key) = 'array';
            IF jsonb_typeof(p_export -> v_key) = 'object' THEN
                SELECT format('field %s', f.k) INTO v_problem
                  FROM (SELECT jsonb_object_keys(p_export -> v_key)
                        UNION SELECT jsonb_object_keys(v_stored -> v_key)) f (k)
                 WHERE (p_export -> v_key -> f.k)::text IS DISTINCT FROM (v_stored -> v_key -> f.k)::text
                 ORDER BY f.k LIMIT 1;
            END IF;
            RAISE EXCEPTION 'the export does not read back identically: its "%" differs from what it stores', v_key
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, key %s%s', v_id, v_key, coalesce(', ' || v_problem, '')),
                      HINT = 'Import exactly what export_conversation wrote: rows with all their columns, as it spells them.';
        END IF;
    EXCEPTION
        WHEN integrity_constraint_violation OR data_exception THEN
            -- The column and the server's message too: a NULL or a cast
            -- that fails names its column and value there.
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_table = TABLE_NAME, v_constraint = CONSTRAINT_NAME,
                                    v_column = COLUMN_NAME, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
            -- The row: a CHECK or NOT NULL that failed is read again over
            -- the document's rows of that table (one pass, on this path
            -- only), and the first row it refuses is named by its place and
            -- its id, seq or key. The table and the rule come from the
            -- catalog, never from the document.
            v_key := (SELECT p.key FROM convo_private.export_places() p WHERE p.tab = v_table);
            v_check := CASE WHEN v_state = '23502' AND nullif(v_column, '') IS NOT NULL THEN format('%I IS NOT NULL', v_column)
                            WHEN v_state = '23514' THEN
                                (SELECT regexp_replace(pg_get_constraintdef(c.oid), '^CHECK \((.*)\)( NOT VALID)?$', '\1')
                                   FROM pg_constraint c
                                  WHERE c.conrelid = format('convo.%I', v_table)::regclass AND c.conname = v_constraint AND c.contype = 'c') END;
            -- A scope key computed here that another effect of the document
            -- already holds (its key epoch, the erasures before it, differs
            -- from the one the document's erasures give): the effect that
            -- holds it is named, by the key the server reports.
            IF v_state = '23505' AND v_table = 'tool_effects' THEN
                SELECT format(', effects row %s of the array (id %s) holds the scope key another effect of the export '
                              'takes in the key epoch its erasures give', j.n, j.elem ->> 'id')
                  INTO v_row
                  FROM jsonb_array_elements(p_export -> 'effects') WITH ORDINALITY j (elem, n)
                 WHERE strpos(v_detail, j.elem ->> 'scope_key') > 0
                 ORDER BY j.n LIMIT 1;
            END IF;
            IF v_key IS NOT NULL AND v_check IS NOT NULL AND jsonb_typeof(p_export -> v_key) = 'array' THEN
              BEGIN
                EXECUTE format('SELECT format(%L, j.n, convo_private.export_row_name(j.elem))
                                  FROM jsonb_array_elements($1) WITH ORDINALITY j (elem, n),
                                       LATERAL jsonb_populate_record(NULL::convo.%I, j.elem) r
                                 WHERE (%s) IS NOT TRUE
                                 ORDER BY j.n LIMIT 1',
                               ', ' || v_key || ' row %s of the array (%s)', v_table,
                               CASE WHEN v_state = '23502' THEN v_check ELSE format('(%s) IS NOT FALSE', v_check) END)
                   INTO v_row USING p_export -> v_key;
              EXCEPTION WHEN OTHERS THEN
                v_row := NULL; -- a row that cannot be read again is not named
              END;
            END IF;
            IF v_row IS NULL AND v_state LIKE '22%' THEN
                v_row := convo_private.unreadable_row(p_export);
            END IF;
            RAISE EXCEPTION 'the export is not well formed'
                USING ERRCODE = 'CV011',
                      DETAIL = format('conversation %s%s, SQLSTATE %s, table %s, constraint %s, column %s: %s', v_id, coalesce(v_row, ''), v_state,
                                      coalesce(nullif(v_table, ''), 'none'), coalesce(nullif(v_constraint, ''), 'none'),
                                      coalesce(nullif(v_column, ''), 'none'), left(v_message, 200));
    END;

    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.import_conversation(text, jsonb) IS
    'Restores an export_conversation document for its owner (convo_admin): only a history the API could have written (CV011 otherwise), seq numbered here, recorded in convo.imports and marked on every row; a repeat returns the id, other content under the id is CV009.';

-- import_librechat: one conversation of LibreChat's own JSON export (a
-- recursive one, replies nested in children, or a flat list) as a new
-- conversation of p_owner_id, by the rules of import_chatgpt wherever they
-- apply: the whole tree by parentMessageId (the zero UUID or null: a root),
-- messages keyed by messageId, original times (createdAt; without one the
-- parent's, a root the conversation's: its earliest createdAt), user when
-- isCreatedByUser else assistant, the latest leaf as the head (there is no
-- current-leaf field: head_fallback latest_leaf), each message kept in
-- import_origins (a recursive export's without its children, which are
-- messages of their own), the top-level fields in metadata.import. Repeats,
-- merges, CV011 (naming the message) and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_librechat(p_owner_id text, p_conversation jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_messages  jsonb := p_conversation -> 'messages';
    v_recursive boolean;
    v_source    text;
    v_id        uuid;
    v_digest    text;
    v_existing  uuid;
    v_where     text;
    v_bad       text[];
    v_nodes     jsonb;
    v_time      timestamptz;
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'import conversations');
    IF p_conversation IS NULL OR jsonb_typeof(p_conversation) <> 'object' THEN
        RAISE EXCEPTION 'p_conversation must be one LibreChat conversation, a JSON object, not %',
                coalesce(jsonb_typeof(p_conversation), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each exported conversation on its own.';
    END IF;
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('librechat', 'LibreChat conversation', p_owner_id,
                                    convo_private.nonempty_text(p_conversation -> 'conversationId'), p_conversation) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'librechat', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'a LibreChat conversation needs a "messages" array, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    v_recursive := p_conversation -> 'recursive' = 'true';
    -- One pass over the messages: the first refusal in document order, the
    -- nodes for import_tree (keyed by messageId: the source parent, the
    -- time, the origin and, when read, the nested children's ids), and the
    -- conversation's time. Parents and duplicates are hash joins.
    WITH f AS MATERIALIZED (
        SELECT x.*,
               CASE WHEN jsonb_typeof(x.message) = 'object' THEN convo_private.nonempty_text(x.message -> 'messageId') END AS id,
               CASE WHEN jsonb_typeof(x.message -> 'parentMessageId') = 'string'
                         AND x.message ->> 'parentMessageId' <> '00000000-0000-0000-0000-000000000000'
                    THEN x.message ->> 'parentMessageId' END AS parent,
               convo_private.iso_time(x.message -> 'createdAt') AS at
          FROM convo_private.librechat_flatten(v_messages, v_recursive) x
    ), ids AS MATERIALIZED (
        SELECT f.id, count(*) AS n FROM f WHERE f.id IS NOT NULL GROUP BY f.id
    ), c AS MATERIALIZED (
        SELECT f.*,
               coalesce(left(f.id, convo_private.max_id_length()),
                        CASE WHEN f.depth = 0 THEN format('messages[%s]', f.ord - 1)
                             ELSE format('children[%s] of message %s', f.ord - 1, coalesce(f.nest_parent, 'without a messageId')) END)
                   AS name,
               CASE WHEN jsonb_typeof(f.message) <> 'object' THEN 'is not an object'
                    WHEN f.id IS NULL THEN 'has no messageId (a non-empty string)'
                    WHEN f.id = '00000000-0000-0000-0000-000000000000'
                        THEN 'has the zero UUID, which means "no parent", as its messageId'
                    WHEN d.n > 1 THEN 'has the messageId of another message too (a duplicate)'
                    WHEN jsonb_typeof(f.message -> 'parentMessageId') NOT IN ('string', 'null')
                        THEN 'has a parentMessageId that is neither a string nor null'
                    WHEN f.parent IS NOT NULL AND p.id IS NULL
                        THEN 'names a parentMessageId that is no message (missing parent)'
                    WHEN jsonb_typeof(f.message -> 'isCreatedByUser') NOT IN ('boolean', 'null')
                        THEN 'has an isCreatedByUser that is neither true nor false'
                    WHEN v_recursive AND jsonb_typeof(f.message -> 'children') NOT IN ('array', 'null')
                        THEN 'has children that are not a list'
                    WHEN jsonb_typeof(f.message -> 'createdAt') NOT IN ('string', 'null')
                         OR (jsonb_typeof(f.message -> 'createdAt') = 'string' AND f.at IS NULL)
                        THEN 'has a createdAt that is not an ISO 8601 time'
                    END AS why
          FROM f
          LEFT JOIN ids d ON d.id = f.id
          LEFT JOIN ids p ON p.id = f.parent
    )
    SELECT (SELECT ARRAY[c.name, c.why] FROM c WHERE c.why IS NOT NULL ORDER BY c.seq LIMIT 1),
           (SELECT coalesce(jsonb_object_agg(c.id, jsonb_build_object('parent', c.parent, 'at', c.at, 'node', c.message)
                                                   || CASE WHEN c.listed THEN jsonb_build_object('children', coalesce(l.children, '[]'))
                                                           ELSE '{}' END), '{}')
              FROM c
              LEFT JOIN (SELECT f.nest_parent, jsonb_agg(f.id ORDER BY f.seq) AS children
                           FROM f WHERE f.nest_parent IS NOT NULL AND f.id IS NOT NULL GROUP BY f.nest_parent) l
                ON l.nest_parent = c.id
             WHERE c.id IS NOT NULL),
           (SELECT min(c.at) FROM c)
      INTO v_bad, v_nodes, v_time;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'LibreChat message % %', v_bad[1], v_bad[2]
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad[1]);
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'librechat', v_source, v_digest, v_nodes, NULL, v_time,
        jsonb_build_object('format', 'librechat', 'source_id', v_source, 'title', p_conversation -> 'title',
                           'conversation', p_conversation - 'messages', 'requested_head', 'null'::jsonb),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_librechat(text, jsonb) IS
    'Import one LibreChat conversation export (recursive or flat; parentMessageId, the latest leaf as the head); a repeat returns the same id.';

-- import_openwebui: one Open WebUI chat (a row of its chat table or of the
-- UI's JSON export, which holds an object "chat", or the bare chat column)
-- as a new conversation of p_owner_id, by the rules of docs/importing.md
-- ("The rules"): history.messages by parentId (several roots when the first message
-- was edited; childrenIds that disagree with parentId are only counted),
-- history.currentId as the head, each message kept verbatim in
-- import_origins. Repeats, merges, CV011 and caps as import_chatgpt.
CREATE OR REPLACE FUNCTION convo.import_openwebui(p_owner_id text, p_chat jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_row      jsonb;
    v_chat     jsonb;
    v_messages jsonb;
    v_current  jsonb;
    v_source   text;
    v_id       uuid;
    v_digest   text;
    v_existing uuid;
    v_where    text;
    v_bad      record;
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'import conversations');
    IF p_chat IS NULL OR jsonb_typeof(p_chat) <> 'object' THEN
        RAISE EXCEPTION 'p_chat must be one Open WebUI chat, a JSON object, not %', coalesce(jsonb_typeof(p_chat), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Import each element of an Open WebUI export on its own.';
    END IF;
    IF jsonb_typeof(p_chat -> 'chat') = 'object' THEN
        v_row := p_chat;
        v_chat := p_chat -> 'chat';
    ELSE
        v_chat := p_chat;
    END IF;
    v_messages := v_chat -> 'history' -> 'messages';
    v_current := v_chat -> 'history' -> 'currentId';
    SELECT k.source, k.conversation_id, k.place, k.digest INTO v_source, v_id, v_where, v_digest
      FROM convo_private.import_key('openwebui', 'Open WebUI chat', p_owner_id,
                                    coalesce(convo_private.nonempty_text(v_row -> 'id'),
                                             convo_private.nonempty_text(v_chat -> 'id')), p_chat) k;
    v_existing := convo_private.import_repeat(p_owner_id, 'openwebui', v_source, v_digest, v_where);
    IF v_existing IS NOT NULL THEN
        RETURN v_existing;
    END IF;

    IF jsonb_typeof(v_messages) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'an Open WebUI chat needs a "history.messages" object, not %', coalesce(jsonb_typeof(v_messages), 'none')
            USING ERRCODE = 'CV011', DETAIL = v_where;
    END IF;
    SELECT e.key, e.why INTO v_bad
      FROM (SELECT n.key, CASE
                   WHEN jsonb_typeof(n.msg) <> 'object' THEN 'is not an object'
                   WHEN jsonb_typeof(n.msg -> 'id') NOT IN ('null') AND n.msg -> 'id' <> to_jsonb(n.key)
                       THEN 'has an id other than its key'
                   WHEN jsonb_typeof(n.msg -> 'role') IS DISTINCT FROM 'string'
                        OR n.msg ->> 'role' NOT IN ('user', 'assistant', 'system')
                       THEN 'has a missing or unknown role'
                   WHEN jsonb_typeof(n.msg -> 'parentId') NOT IN ('null')
                        AND (jsonb_typeof(n.msg -> 'parentId') <> 'string' OR NOT v_messages ? (n.msg ->> 'parentId'))
                       THEN 'names a parentId that is no message (missing parent)'
                   WHEN jsonb_typeof(n.msg -> 'childrenIds') NOT IN ('array', 'null')
                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.msg -> 'childrenIds') = 'array'
                                                                           THEN n.msg -> 'childrenIds' END) c (child)
                                    WHERE jsonb_typeof(c.child) <> 'string')
                       THEN 'has childrenIds that are not an array of strings'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') NOT IN ('number', 'null')
                       THEN 'has a timestamp that is neither a number nor null'
                   WHEN jsonb_typeof(n.msg -> 'timestamp') = 'number'
                        AND convo_private.epoch_time(n.msg -> 'timestamp', 1e11) IS NULL
                       THEN 'has a timestamp outside years 1 to 9999'
                   END AS why
              FROM jsonb_each(v_messages) AS n (key, msg)) e
     WHERE e.why IS NOT NULL
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'Open WebUI message % %', v_bad.key, v_bad.why
            USING ERRCODE = 'CV011', DETAIL = format('%s, message %s', v_where, v_bad.key);
    END IF;
    IF jsonb_typeof(v_current) IS DISTINCT FROM 'null' AND v_current IS NOT NULL
       AND (jsonb_typeof(v_current) <> 'string' OR NOT v_messages ? (v_current #>> '{}')) THEN
        RAISE EXCEPTION 'history.currentId names no message'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, currentId %s', v_where, left(v_current::text, convo_private.max_id_length()));
    END IF;

    RETURN convo_private.import_tree(v_id, p_owner_id, 'openwebui', v_source, v_digest, v_messages,
        CASE WHEN jsonb_typeof(v_current) = 'string' THEN v_current #>> '{}' END,
        coalesce(convo_private.epoch_time(v_row -> 'created_at', 1e11), convo_private.epoch_time(v_chat -> 'timestamp', 1e11)),
        jsonb_build_object('format', 'openwebui', 'source_id', v_source,
                           'title', coalesce(nullif(v_row -> 'title', 'null'), v_chat -> 'title'),
                           'chat', v_chat - 'history' - 'messages', 'row', v_row - 'chat',
                           'requested_head', coalesce(v_current, 'null')),
        v_where);
END;
$$;

COMMENT ON FUNCTION convo.import_openwebui(text, jsonb) IS
    'Import one Open WebUI chat (history.messages by parentId, currentId as the head); a repeat returns the same id.';

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. One statement (each part of it filtered by the argument, so
-- that on a distributed database it reads the node it runs on) checks the owner (sees_owner, CV002 otherwise,
-- through conversation_ref) and reads the live-path index (convo.live_path:
-- one row per branch the path runs through, kept by every head move) and
-- the sibling counts (the few later siblings, messages_forks_idx, as one
-- object by parent that each row looks up); a second reads the messages: a
-- conversation never edited is one segment, one range scan of
-- messages_branch_key in depth order, as a flat list is; an edited one a
-- range scan per segment. No probe and no join per message, whatever the
-- plan. Empty before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_seen     boolean;
    v_branches uuid[];  -- the segments, root first: each branch
    v_depths   int[];   -- and the deepest of it on the path
    v_forks    jsonb;   -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    SELECT true,
           (SELECT array_agg(l.branch_id ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id),
           (SELECT array_agg(l.max_depth ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id),
           (SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n)
              FROM (SELECT f.parent_id, max(f.sibling_index) AS n
                      FROM convo.messages f
                     WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
                     GROUP BY f.parent_id) f)
      INTO v_seen, v_branches, v_depths, v_forks
      FROM convo.conversations c
     WHERE c.id = p_conversation_id AND convo_private.sees_owner(c.owner_id);
    IF v_seen IS NULL THEN
        PERFORM convo_private.conversation_ref(p_conversation_id); -- CV011 or CV002
    END IF;
    IF cardinality(v_branches) = 1 THEN
        RETURN QUERY
        SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
               CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.branch_id = v_branches[1] AND m.depth <= v_depths[1]
         ORDER BY m.depth;
    ELSIF cardinality(v_branches) > 1 THEN
        RETURN QUERY
        SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
               CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
          FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
          JOIN convo.messages m
            ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
         ORDER BY m.depth;
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';

-- register_tool: the allowlist, kept by the DBA. A version once registered
-- is frozen: the same settings return the latest version, other settings
-- make the next one. The schema is checked here (check_args_schema), so a
-- keyword outside the supported subset is refused and never silently ignored.
CREATE OR REPLACE FUNCTION convo.register_tool(
    p_name              text,
    p_effectful         boolean,
    p_args_schema       jsonb,
    p_idempotency_scope text DEFAULT 'tool_call',
    p_deadline          interval DEFAULT '20 seconds',
    p_amount_arg        text DEFAULT NULL,
    p_currency_arg      text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    RETURN convo_private.register_tool_in('convo.tools', p_name, p_effectful, p_args_schema, p_idempotency_scope,
                                          p_deadline, p_amount_arg, p_currency_arg);
END;
$$;

COMMENT ON FUNCTION convo.register_tool(text, boolean, jsonb, text, interval, text, text) IS
    'Allowlist a tool: frozen argument schema (JSON Schema subset), idempotency scope, deadline; returns its version.';

-- apply_grants: makes the catalog grant exactly documented_grants: revokes
-- every other privilege (PUBLIC's default EXECUTE included), then grants
-- what is missing. Run by each migration that adds or changes an object,
-- after hand_over_objects has given the owner role what it created;
-- idempotent.
CREATE OR REPLACE FUNCTION convo_private.apply_grants()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT * FROM convo_private.granted_privileges()
             EXCEPT SELECT * FROM convo_private.documented_grants() LOOP
        EXECUTE format('REVOKE %s ON %s %s FROM %s', v.privilege, v.object_kind, v.object_name,
                       CASE v.grantee WHEN 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(v.grantee) END);
    END LOOP;
    FOR v IN SELECT * FROM convo_private.documented_grants()
             EXCEPT SELECT * FROM convo_private.granted_privileges() LOOP
        EXECUTE format('GRANT %s ON %s %s TO %I', v.privilege, v.object_kind, v.object_name, v.grantee);
    END LOOP;
END;
$$;

-- beside: the relation that holds p_table's rows stored beside
-- p_conversation_id's: p_table itself on one server; on a distributed
-- database, p_table's shard that holds the conversation, on the node a
-- delegated call runs on (Citus routes none of its statements to another
-- conversation's rows, even in that shard). What an error names there is
-- looked up there: the lookups by id alone of raise_not_found's callers.
CREATE OR REPLACE FUNCTION convo_private.beside(p_table regclass, p_conversation_id uuid)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shard text;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT shard_name(p.logicalrelid, get_shard_id_for_distribution_column(p.logicalrelid, $2))
                   FROM pg_dist_partition p WHERE p.logicalrelid = $1 AND p.partmethod = ''h'''
           INTO v_shard USING p_table, p_conversation_id;
    END IF;
    RETURN coalesce(v_shard, p_table::text);
END;
$$;

-- check_erase_owner: the arguments and the session of erase_owner, checked
-- before any lock is taken: an owner this session may write for
-- (check_owner: CV011, as begin_receipt answers another owner), a reason
-- (CV011, at most max_ref_length: CV010), and READ COMMITTED (0A000): a snapshot
-- taken before erase_owner waits for the owner's transactions could not
-- see what they made, and would record the owner as erased and leave that.
CREATE OR REPLACE FUNCTION convo_private.check_erase_owner(p_owner_id text, p_reason text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.check_owner(p_owner_id, 'erase the content');
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s', p_owner_id);
    END IF;
    -- A snapshot taken before it waits (REPEATABLE READ or SERIALIZABLE
    -- takes one at the transaction's first statement) could not see what
    -- the owner's transactions it waits for made: it would record the
    -- owner as erased and leave that.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'erase_owner runs in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
            USING ERRCODE = '0A000', DETAIL = format('owner %s', p_owner_id),
                  HINT = 'Call it in a transaction of its own at READ COMMITTED, the default.';
    END IF;
END;
$$;

-- check_owner: an owner the session may act for, checked before anything
-- of the owner's is made, changed or locked: an owner is required, at most
-- max_id_length characters, and one this session may write for
-- (writes_owner: every owner for convo_admin, else the one its session
-- set); CV011 otherwise, p_action saying what was refused. The one owner
-- check of conversations, imports, receipts and erasure.
CREATE OR REPLACE FUNCTION convo_private.check_owner(p_owner_id text, p_action text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL'));
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not % for owner %', p_action, p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first (convo_admin acts for any owner).';
    END IF;
END;
$$;

-- check_sidebar: the arguments of conversations() (a sidebar page), checked
-- before any row is read: the owner this session may see (CV011 for
-- another), a limit of 1 to 1,000, p_archived given, and p_before_id only
-- with p_before. On a distributed database each node's part of the page
-- checks them too.
CREATE OR REPLACE FUNCTION convo_private.check_sidebar(
    p_owner_id  text,
    p_limit     int,
    p_before    timestamptz,
    p_archived  boolean,
    p_before_id uuid)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_owner_id IS NULL OR NOT convo_private.sees_owner(p_owner_id) THEN
        RAISE EXCEPTION 'p_owner_id must be the owner this session acts for'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL')),
                  HINT = 'Name the owner with SET LOCAL convo.owner_id first.';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 1000, not %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF p_archived IS NULL THEN
        RAISE EXCEPTION 'p_archived must be true or false'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF p_before_id IS NOT NULL AND p_before IS NULL THEN
        RAISE EXCEPTION 'p_before_id goes with p_before: both are the last row of the previous page'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, p_before_id %s', p_owner_id, p_before_id);
    END IF;
END;
$$;

-- effect_ref: the effect a call names, locked for its transition. CV003 if
-- it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo_private.effect_ref(p_conversation_id uuid, p_effect_id uuid)
RETURNS convo.tool_effects
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_effect convo.tool_effects;
BEGIN
    IF p_effect_id IS NULL THEN
        RAISE EXCEPTION 'p_effect_id is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_effect FROM convo.tool_effects e
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_effect;
    END IF;
    PERFORM convo_private.raise_not_found('effect', p_effect_id::text, p_conversation_id,
        convo_private.other_conversation(p_conversation_id, 'convo.tool_effects', 'id', p_effect_id::text));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- erase_content: one erasure: every row of the conversation that holds
-- content becomes its redact_row, recorded first in convo.erasures, with
-- one row per place (table) where rows changed in convo.erasure_places; or,
-- with no conversation, every receipt of the owner, recorded in
-- convo.owner_erasures. Each record lives beside what it erased (on a
-- distributed database, on the node of the conversation, or of the owner).
-- It is the one piece of pgconvo that updates content: the tables refuse
-- every UPDATE of content from outside pgconvo's code. Rows already
-- redacted are left alone, so a repeat changes nothing and returns no rows,
-- but is recorded.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_place   record;
    v_n       bigint;
    v_rows    jsonb[];
BEGIN
    IF p_conversation_id IS NULL THEN
        SELECT array_agg(convo_private.redact_row('tool_receipts', to_jsonb(t))) INTO v_rows
          FROM convo.tool_receipts t
         WHERE t.owner_id = p_owner_id
           AND to_jsonb(t)::text <> convo_private.redact_row('tool_receipts', to_jsonb(t))::text;
        UPDATE convo.tool_receipts t
           SET (request, request_digest, arguments, expected)
             = (SELECT x.request, x.request_digest, x.arguments, x.expected
                  FROM jsonb_populate_record(NULL::convo.tool_receipts, r.j) x)
          FROM unnest(v_rows) AS r (j)
         WHERE t.owner_id = p_owner_id AND t.id = (r.j ->> 'id')::uuid;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        INSERT INTO convo.owner_erasures (owner_id, id, reason, receipts_redacted)
        VALUES (p_owner_id, v_erasure, p_reason, v_n);
        IF v_n > 0 THEN
            place := 'tool_receipts';
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
        RETURN;
    END IF;
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    -- Each place: its table, the columns redact_row changes, the column
    -- that selects the conversation's rows and the one that tells them
    -- apart. The redacted rows are read first and written by key: an
    -- UPDATE computes nothing from the rows it changes (Citus refuses a
    -- STABLE function over them, as to_jsonb is).
    FOR v_place IN
        SELECT * FROM (VALUES
            ('messages', 'parts', 'conversation_id', 'id', 'uuid'),
            ('conversations', 'metadata, title', 'id', 'id', 'uuid'),
            ('conversation_changes', 'old_value, new_value', 'conversation_id', 'seq', 'bigint'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id', 'id', 'uuid'),
            ('tool_effects', 'arguments', 'conversation_id', 'id', 'uuid'),
            ('tool_effect_events', 'evidence', 'conversation_id', 'seq', 'bigint'),
            ('import_origins', 'node', 'conversation_id', 'message_id', 'uuid'),
            ('imports', 'source_key, digest', 'conversation_id', 'id', 'uuid')) AS p (tab, cols, key, pk, pk_type)
    LOOP
        EXECUTE format('SELECT array_agg(convo_private.redact_row(%1$L, to_jsonb(t))) FROM convo.%1$I t
                         WHERE t.%2$I = $1 AND to_jsonb(t)::text <> convo_private.redact_row(%1$L, to_jsonb(t))::text',
                       v_place.tab, v_place.key)
           INTO v_rows USING p_conversation_id;
        EXECUTE format('UPDATE convo.%1$I t SET (%2$s) = (SELECT %2$s FROM jsonb_populate_record(NULL::convo.%1$I, r.j))
                          FROM unnest($2) AS r (j)
                         WHERE t.%3$I = $1 AND t.%4$I = (r.j ->> %4$L)::%5$s',
                       v_place.tab, v_place.cols, v_place.key, v_place.pk, v_place.pk_type)
        USING p_conversation_id, v_rows;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted, conversation_id)
            VALUES (p_owner_id, v_erasure, v_place.tab, v_n, p_conversation_id);
            place := v_place.tab;
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
    -- A new version of the conversation's row when anything was erased,
    -- whatever the row itself held: a transaction whose snapshot is older
    -- than the erasure (REPEATABLE READ) then cannot lock the conversation
    -- to write to it (40001), where it would count its key epoch without the
    -- erasure and meet the erased keys (record_tool_call). A repeat that
    -- erased nothing leaves the row as it was.
    IF EXISTS (SELECT 1 FROM convo.erasure_places x
                WHERE x.conversation_id = p_conversation_id AND x.erasure_id = v_erasure) THEN
        UPDATE convo.conversations c SET last_activity_at = c.last_activity_at WHERE c.id = p_conversation_id;
    END IF;
END;
$$;

-- expire_receipts_in: expire_receipts' sweep over the receipts stored in
-- p_receipts: convo.tool_receipts on one server; on a distributed
-- database, each of a node's shards of it (expire_receipts_on_node). Each
-- pending receipt past its deadline at p_now fails with 504
-- deadline_exceeded; returns how many.
CREATE OR REPLACE FUNCTION convo_private.expire_receipts_in(p_receipts text, p_now timestamptz)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count int;
BEGIN
    EXECUTE format('
    WITH expired AS (
        UPDATE %s r
           SET status = ''failed'', http_status = 504, error_code = ''deadline_exceeded'', settled_at = $2
         WHERE r.status = ''pending'' AND r.deadline_at < $1
        RETURNING r.id, r.arguments IS NOT NULL AS filled)
    SELECT count(*)::int
      FROM expired e, LATERAL (SELECT convo_private.notify_receipt(e.id, ''failed'', e.filled)) n', p_receipts)
       INTO v_count USING p_now, clock_timestamp();
    RETURN v_count;
END;
$$;

-- export_of: the export document of one conversation (format pgconvo.export,
-- version 3; every key is described in docs/erasure.md and on
-- convo.export_conversation), without an owner check: export_conversation
-- checks the reader, import_conversation compares an import with what it
-- stored. Every row is the table's own row as jsonb, without the
-- conversation id it repeats, in a fixed order, and times print in UTC, so
-- the same rows give the same text in any session and any database.
-- PL/pgSQL, as every function over the tables (a distributed engine runs
-- its statements where the rows are). The
-- tools are the versions the ledger's calls and effects were checked
-- against; the imports are the conversation's record of imports.
CREATE OR REPLACE FUNCTION convo_private.export_of(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
DECLARE
    v_doc   jsonb;
    v_part  jsonb;
    v_tools text[];
BEGIN
    -- One statement a part, each over one table filtered by the
    -- conversation: on a distributed database Citus routes each to the node
    -- that holds the conversation, where it plans no statement that mixes
    -- the allowlist (on every node) or several tables' subqueries.
    SELECT jsonb_build_object('format', 'pgconvo.export', 'version', 3, 'conversation', to_jsonb(c))
      INTO v_doc FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF v_doc IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(jsonb_agg(to_jsonb(m) - 'conversation_id' ORDER BY m.depth, m.parent_id, m.sibling_index), '[]')
      INTO v_part FROM convo.messages m WHERE m.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('messages', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(l) - 'conversation_id' ORDER BY l.seq), '[]')
      INTO v_part FROM convo.conversation_head_log l WHERE l.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('head_log', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(x) - 'conversation_id' ORDER BY x.seq), '[]')
      INTO v_part FROM convo.conversation_changes x WHERE x.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('changes', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(g) - 'conversation_id' ORDER BY g.started_at, g.id), '[]')
      INTO v_part FROM convo.generations g WHERE g.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('generations', v_part);
    -- The tool versions named, as name/version (a name holds no /).
    v_tools := ARRAY(SELECT e.tool_name || '/' || e.tool_version FROM convo.tool_effects e
                      WHERE e.conversation_id = p_conversation_id);
    v_tools := v_tools || ARRAY(SELECT k.tool_name || '/' || k.tool_version FROM convo.tool_effect_calls k
                                 WHERE k.conversation_id = p_conversation_id);
    SELECT coalesce(jsonb_agg(to_jsonb(t) - 'registered_at' - 'registered_by' ORDER BY t.name, t.version), '[]')
      INTO v_part FROM convo.tools t WHERE t.name || '/' || t.version = ANY (v_tools);
    v_doc := v_doc || jsonb_build_object('tools', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(k) - 'conversation_id' ORDER BY k.decided_at, k.tool_call_id), '[]')
      INTO v_part FROM convo.tool_effect_calls k WHERE k.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('tool_calls', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(e) - 'conversation_id' ORDER BY e.requested_at, e.id), '[]')
      INTO v_part FROM convo.tool_effects e WHERE e.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('effects', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(v) - 'conversation_id' ORDER BY v.seq), '[]')
      INTO v_part FROM convo.tool_effect_events v WHERE v.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('effect_events', v_part);
    -- Each erasure with its places, by erasure.
    SELECT coalesce(jsonb_agg(to_jsonb(r) - 'conversation_id' - 'places' || jsonb_build_object('places', r.places)
                              ORDER BY r.erased_at, r.id), '[]')
      INTO v_part
      FROM (SELECT e.*, coalesce((SELECT jsonb_agg(jsonb_build_object('place', x.place, 'rows_redacted', x.rows_redacted)
                                                   ORDER BY x.place)
                                    FROM convo.erasure_places x
                                   WHERE x.conversation_id = p_conversation_id AND x.erasure_id = e.id), '[]') AS places
              FROM convo.erasures e WHERE e.conversation_id = p_conversation_id) r;
    v_doc := v_doc || jsonb_build_object('erasures', v_part);
    -- Import origins: the source node of each message that came from
    -- another product (import_chatgpt, import_openwebui, import_librechat),
    -- by message.
    SELECT coalesce(jsonb_agg(to_jsonb(o) - 'conversation_id' ORDER BY o.message_id), '[]')
      INTO v_part FROM convo.import_origins o WHERE o.conversation_id = p_conversation_id;
    v_doc := v_doc || jsonb_build_object('origins', v_part);
    SELECT coalesce(jsonb_agg(to_jsonb(i) - 'conversation_id' ORDER BY i.imported_at, i.id), '[]')
      INTO v_part FROM convo.imports i WHERE i.conversation_id = p_conversation_id;
    RETURN v_doc || jsonb_build_object('imports', v_part);
END;
$$;

-- generation_ref: the generation a call names, locked for its transition.
-- CV003 if it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo_private.generation_ref(p_conversation_id uuid, p_generation_id uuid)
RETURNS convo.generations
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_generation convo.generations;
BEGIN
    IF p_generation_id IS NULL THEN
        RAISE EXCEPTION 'p_generation_id is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_generation FROM convo.generations g
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_generation;
    END IF;
    PERFORM convo_private.raise_not_found('generation', p_generation_id::text, p_conversation_id,
        convo_private.other_conversation(p_conversation_id, 'convo.generations', 'id', p_generation_id::text));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- hand_over_objects: gives convo_owner every object of schemas convo and
-- convo_private that another role owns, as if convo_owner had created it:
-- the owner, and no EXECUTE for PUBLIC on a routine (the default privileges
-- 0003 set for convo_owner). A migration as cmd/newmigration writes it
-- creates its objects as the migrating role, not as convo_owner (Citus
-- sends DDL to its workers over new connections as the current role, and
-- convo_owner cannot log in), then runs this, then apply_grants. What
-- follows another object's owner goes with it: a table's indexes, row type
-- and column sequences, a type's array (a range's constructors stay the
-- bootstrap superuser's, whoever creates the range). Invoker rights: the
-- migrating role runs it, a superuser or a member of convo_owner.
CREATE OR REPLACE FUNCTION convo_private.hand_over_objects()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    FOR v IN
        WITH ours (classid, objid, owner) AS (
            SELECT 'pg_namespace'::regclass, n.oid, n.nspowner FROM pg_namespace n
             WHERE n.nspname IN ('convo', 'convo_private')
            UNION ALL
            SELECT 'pg_class'::regclass, c.oid, c.relowner FROM pg_class c
             WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
               AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
               AND NOT EXISTS (SELECT FROM pg_depend d      -- a column's sequence goes with its table
                                WHERE c.relkind = 'S' AND d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))
            UNION ALL
            SELECT 'pg_type'::regclass, t.oid, t.typowner FROM pg_type t
             WHERE t.typnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
               AND NOT EXISTS (SELECT FROM pg_type e WHERE e.typarray = t.oid)
               AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c')
            UNION ALL
            SELECT 'pg_proc'::regclass, p.oid, p.proowner FROM pg_proc p
             WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
               AND NOT EXISTS (SELECT FROM pg_depend d      -- a range's constructors
                                WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'i')
            UNION ALL
            SELECT 'pg_operator'::regclass, o.oid, o.oprowner FROM pg_operator o
             WHERE o.oprnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_opclass'::regclass, o.oid, o.opcowner FROM pg_opclass o
             WHERE o.opcnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_opfamily'::regclass, o.oid, o.opfowner FROM pg_opfamily o
             WHERE o.opfnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_collation'::regclass, o.oid, o.collowner FROM pg_collation o
             WHERE o.collnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_conversion'::regclass, o.oid, o.conowner FROM pg_conversion o
             WHERE o.connamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_ts_config'::regclass, o.oid, o.cfgowner FROM pg_ts_config o
             WHERE o.cfgnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_ts_dict'::regclass, o.oid, o.dictowner FROM pg_ts_dict o
             WHERE o.dictnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
            UNION ALL
            SELECT 'pg_statistic_ext'::regclass, o.oid, o.stxowner FROM pg_statistic_ext o
             WHERE o.stxnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace))
        SELECT ours.classid, i.type, i.identity
          FROM ours CROSS JOIN LATERAL pg_identify_object(ours.classid, ours.objid, 0) i
         WHERE ours.owner <> 'convo_owner'::regrole
         ORDER BY ours.classid = 'pg_namespace'::regclass DESC, i.type, i.identity
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO convo_owner',
                       CASE v.type WHEN 'partitioned table' THEN 'TABLE'
                                   WHEN 'statistics object' THEN 'STATISTICS'
                                   ELSE upper(v.type) END,
                       v.identity);
        IF v.classid = 'pg_proc'::regclass THEN
            EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', v.identity);
        END IF;
    END LOOP;
END;
$$;

-- hold_new_owner: the owner checks of whatever makes a conversation (a
-- new one, an import), p_action saying what in the error (check_owner: a
-- convo_app session makes them only for the owner it set); then it holds
-- the owner against an owner-wide erasure running meanwhile (hold_owner). On a
-- distributed database it runs on the owner's node, apart from the
-- conversation's.
CREATE OR REPLACE FUNCTION convo_private.hold_new_owner(p_owner_id text, p_action text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.check_owner(p_owner_id, p_action);
    PERFORM convo_private.hold_owner(p_owner_id, false);
END;
$$;

-- key_epoch: a conversation's key epoch at p_at (NULL: now): the number of
-- its erasures recorded by then (erase_conversation's, or erase_owner's one
-- per conversation), by the erasures' index. scope_key digests it, so that a
-- call after an erasure never shares a key with the erased calls before it.
-- An effect's epoch is the one at its requested_at, a call's at its
-- decided_at: an erasure at the same instant counts, since it redacted the
-- effect, whose key is then no longer computed from its input. PL/pgSQL:
-- Citus plans no SQL function's parameters in a query it routes.
CREATE OR REPLACE FUNCTION convo_private.key_epoch(p_conversation_id uuid, p_at timestamptz)
RETURNS int
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT count(*)::int FROM convo.erasures r
             WHERE r.conversation_id = p_conversation_id AND (p_at IS NULL OR r.erased_at <= p_at));
END;
$$;

-- message_ref: the message a call names, in the conversation it names.
-- A message of another conversation is CV003, no such message CV002.
CREATE OR REPLACE FUNCTION convo_private.message_ref(p_conversation_id uuid, p_message_id uuid)
RETURNS convo.messages
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
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
    PERFORM convo_private.raise_not_found('message', p_message_id::text, p_conversation_id,
        convo_private.other_conversation(p_conversation_id, 'convo.messages', 'id', p_message_id::text));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;

-- new_conversation: the conversation row of create_conversation, whose
-- owner hold_new_owner has checked and holds, with id p_conversation_id
-- (given by the caller when p_given: then a taken id is a retry, the same
-- call returning it, anything else CV009); with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
CREATE OR REPLACE FUNCTION convo_private.new_conversation(
    p_conversation_id uuid,
    p_owner_id        text,
    p_system_prompt   text,
    p_metadata        jsonb,
    p_given           boolean)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_existing convo.conversations;
    v_taken    boolean := false;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
BEGIN
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'p_metadata must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF octet_length(p_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s: %s bytes', p_owner_id, octet_length(p_metadata::text));
    END IF;

    -- A given id that is taken is a retry: read first without a lock, so
    -- that another owner's row is never locked or waited for (an UPDATE in
    -- progress would hold up an INSERT ... ON CONFLICT on it).
    IF p_given THEN
        PERFORM FROM convo.conversations c WHERE c.id = p_conversation_id;
        v_taken := FOUND;
    END IF;
    IF NOT v_taken THEN
        INSERT INTO convo.conversations (id, owner_id, metadata)
        VALUES (p_conversation_id, p_owner_id, p_metadata)
        ON CONFLICT (id) DO NOTHING;
        v_taken := NOT FOUND; -- a concurrent call with the same id came first
    END IF;
    IF v_taken THEN
        -- The same owner, metadata and system prompt return the first
        -- result; anything else, another owner's id included, is CV009.
        -- Locked only if it is this owner's.
        SELECT * INTO v_existing FROM convo.conversations c
         WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id
           FOR NO KEY UPDATE;
        -- The system prompt is the message the 'create' move named, whatever
        -- was appended since; compared as text, like the metadata.
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata::text IS DISTINCT FROM p_metadata::text
           OR (SELECT m.parts FROM convo.conversation_head_log l
                 JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.head_message_id
                WHERE l.conversation_id = p_conversation_id AND l.reason = 'create')::text IS DISTINCT FROM v_parts::text THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', p_conversation_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', p_conversation_id);
        END IF;
        RETURN p_conversation_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        PERFORM convo_private.write_messages(p_conversation_id, NULL, ARRAY[v_root], ARRAY[NULL::uuid], ARRAY['system'],
                                             ARRAY[v_parts], NULL, NULL, NULL, v_root, 'create', NULL);
    END IF;
    RETURN p_conversation_id;
END;
$$;

-- orphaned_applied_effects_in: the rows of orphaned_applied_effects_rows
-- read from the relations named: convo.tool_effects, convo.conversations,
-- convo.tool_effect_calls and convo.messages on one server; on a
-- distributed database, one node's shards of them that hold the same
-- conversations (view_rows_on_node), where its recursive walk of a
-- conversation's branches reads plain tables.
CREATE OR REPLACE FUNCTION convo_private.orphaned_applied_effects_in(
    p_tool_effects      text,
    p_conversations     text,
    p_tool_effect_calls text,
    p_messages          text)
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, external_ref text, amount_minor bigint,
               currency char(3), settled_at timestamptz, tool_call_ids text[])
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('
    SELECT e.conversation_id, e.id, e.tool_name, e.external_ref, e.amount_minor, e.currency, e.settled_at,
           ARRAY(SELECT l.tool_call_id FROM %3$s l
                  WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
                  ORDER BY l.decided_at)
      FROM %1$s e
      JOIN %2$s c ON c.id = e.conversation_id
     WHERE e.state = ''applied''
       AND convo_private.sees_owner(c.owner_id)
       AND NOT EXISTS (
            WITH RECURSIVE segments (branch_id, max_depth) AS (
                SELECT h.branch_id, h.depth
                  FROM %4$s h
                 WHERE h.conversation_id = c.id AND h.id = c.head_message_id
                UNION ALL
                SELECT fork.branch_id, fork.depth
                  FROM segments s
                  JOIN %4$s start ON start.conversation_id = c.id AND start.id = s.branch_id
                  JOIN %4$s fork ON fork.conversation_id = c.id AND fork.id = start.parent_id
            )
            SELECT 1
              FROM %3$s l
              JOIN %4$s m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
              JOIN segments s ON s.branch_id = m.branch_id AND m.depth <= s.max_depth
             WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id)', p_tool_effects, p_conversations, p_tool_effect_calls, p_messages);
END;
$$;

-- orphaned_applied_effects_rows: the rows of the view
-- convo.orphaned_applied_effects (applied effects none of whose tool calls
-- sits on the path from the root to its conversation's current head), the
-- caller's owner's only (sees_owner: every owner for convo_reader).
-- Reachability is computed, never stored, so a later branch switch cannot
-- make it wrong. A PL/pgSQL function, so that no condition of a caller's
-- reaches its scans: the planner pushes a leakproof condition (=, <, >= on
-- a uuid, a number, a text) through a security_barrier view down to the
-- table scans below the view's owner filter, and EXPLAIN ANALYZE's actual
-- row counts there would count, and so read by halving, every owner's rows.
-- A function scan shows nothing of what it reads. SECURITY DEFINER: the
-- reader holds no table privilege.
CREATE OR REPLACE FUNCTION convo_private.orphaned_applied_effects_rows()
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, external_ref text, amount_minor bigint,
               currency char(3), settled_at timestamptz, tool_call_ids text[])
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    RETURN QUERY SELECT * FROM convo_private.orphaned_applied_effects_in('convo.tool_effects', 'convo.conversations',
                                                                      'convo.tool_effect_calls', 'convo.messages');
END;
$$;

-- other_conversation: the conversation of a row of p_table whose p_column
-- is p_value (and that meets p_where, a condition written in pgconvo's
-- code, when given), among the rows stored beside p_conversation_id's
-- (beside): which conversation an id of the wrong one belongs to, for
-- raise_not_found's CV003. On one server that is every conversation; on a
-- distributed database, those of the same shard, and an id of another
-- shard's is not found (CV002). One index probe: p_value is cast to the
-- column's type.
CREATE OR REPLACE FUNCTION convo_private.other_conversation(
    p_conversation_id uuid,
    p_table           regclass,
    p_column          text,
    p_value           text,
    p_where           text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_other uuid;
BEGIN
    IF p_value IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT t.conversation_id FROM %s t WHERE t.%I = $1::%s%s LIMIT 1',
                   convo_private.beside(p_table, p_conversation_id), p_column,
                   (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                     WHERE a.attrelid = p_table AND a.attname = p_column),
                   CASE WHEN p_where IS NOT NULL THEN ' AND ' || p_where ELSE '' END)
       INTO v_other USING p_value;
    RETURN v_other;
END;
$$;

-- owner_beside: the owner of p_other_conversation_id, a conversation stored
-- beside p_conversation_id (other_conversation found it there), read where
-- it is stored (beside).
CREATE OR REPLACE FUNCTION convo_private.owner_beside(p_conversation_id uuid, p_other_conversation_id uuid)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner text;
BEGIN
    EXECUTE format('SELECT c.owner_id FROM %s c WHERE c.id = $1', convo_private.beside('convo.conversations', p_conversation_id))
       INTO v_owner USING p_other_conversation_id;
    RETURN v_owner;
END;
$$;

-- raise_not_found: the error for an id that names nothing in the
-- conversation a call names: CV003 when it names a row of another
-- conversation (p_other_conversation_id) that the caller may see, CV002 when
-- it names none, or only rows of an owner the caller may not see. The
-- other conversation is one stored beside the first (other_conversation).
CREATE OR REPLACE FUNCTION convo_private.raise_not_found(
    p_what                  text,
    p_id                    text,
    p_conversation_id       uuid,
    p_other_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_other_conversation_id IS NOT NULL
       AND convo_private.sees_owner(convo_private.owner_beside(p_conversation_id, p_other_conversation_id)) THEN
        RAISE EXCEPTION '% % belongs to another conversation', p_what, p_id
            USING ERRCODE = 'CV003',
                  DETAIL = format('%s %s, conversation %s, named in conversation %s',
                                  p_what, p_id, p_other_conversation_id, p_conversation_id);
    END IF;
    RAISE EXCEPTION '% % does not exist', p_what, p_id
        USING ERRCODE = 'CV002', DETAIL = format('%s %s, conversation %s', p_what, p_id, p_conversation_id);
END;
$$;

-- receipt_ref: the receipt a call names, locked for its transition; CV002
-- if there is none or the caller may not write for its owner. The owner is
-- checked first, without a lock, and the lock is taken by the receipt's key
-- (owner, id): another owner's receipt is never locked or waited for. A
-- session with its owner set looks among that owner's receipts only, by
-- their key (on a distributed database, on the owner's node, where the
-- routers send the call); one without (convo_admin's) by id.
CREATE OR REPLACE FUNCTION convo_private.receipt_ref(p_receipt_id uuid)
RETURNS convo.tool_receipts
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts;
    v_owner   text;
BEGIN
    IF p_receipt_id IS NULL THEN
        RAISE EXCEPTION 'p_receipt_id is required' USING ERRCODE = 'CV011', DETAIL = 'receipt NULL';
    END IF;
    v_owner := nullif(current_setting('convo.owner_id', true), '');
    IF v_owner IS NULL THEN
        SELECT r.owner_id INTO v_owner FROM convo.tool_receipts r WHERE r.id = p_receipt_id;
    END IF;
    IF NOT convo_private.writes_owner(v_owner) THEN
        v_owner := NULL;
    END IF;
    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = v_owner AND r.id = p_receipt_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt % does not exist', p_receipt_id
            USING ERRCODE = 'CV002', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    RETURN v_receipt;
END;
$$;

-- record_tool_call: writes one tool call's ledger decision, from
-- write_messages, in the transaction that stores its tool_use part, before
-- any request can leave, against the tool's latest version at that moment,
-- which the call's row names (so the decision can be checked against it).
-- An unregistered tool gets no row (effect_for_call answers CV007, even once
-- it is registered); write_messages calls it for no import (those calls
-- happened elsewhere). A new effect's first event is written with it
-- (effect_event).
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key (of this key epoch:
--             since the conversation's latest erasure): the call is linked to it.
--   confirm:  a re-run (same tool, same fork point, an earlier call on another
--             branch) under a new key: held in awaiting_confirmation.
--   execute:  a new pending effect under the scope key.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_ordinal         int,
    p_tool_call_id    text,
    p_tool_name       text,
    p_input           jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Planned afresh for each call: a message of N calls grows the ledger
-- within one statement, and a plan cached while the tables were nearly
-- empty (a sequential scan) would make each call cost the calls before it.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := p_input;
    v_now       timestamptz := clock_timestamp();
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
    v_epoch     int;
    v_effect    convo.tool_effects;
    v_repeats   uuid;
    v_seg_branches uuid[]; -- the segments of this message's path: each branch
    v_seg_depths   int[];  -- and the deepest of it on the path
    v_decision  text;
    v_money     record;
    v_id        uuid := gen_random_uuid();
BEGIN
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = p_tool_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_fork := convo_private.call_fork_point(p_conversation_id, p_message_id);
    v_errors := CASE WHEN v_tool.effectful THEN convo.args_errors(v_tool.args_schema, v_input) END;
    IF NOT v_tool.effectful THEN
        v_decision := 'replay';
    ELSIF cardinality(v_errors) > 0 THEN
        -- Rejected calls never deduplicate: the key is the call's own.
        v_decision := 'rejected';
        v_scope_key := convo_private.scope_key('rejected', p_conversation_id, p_tool_call_id, NULL, NULL, NULL,
                                               convo_private.key_epoch(p_conversation_id, NULL));
    ELSE
        -- The key of this epoch (every erasure so far: the conversation is
        -- locked), so nothing erased is ever matched.
        v_epoch := convo_private.key_epoch(p_conversation_id, NULL);
        v_scope_key := convo_private.scope_key(v_tool.idempotency_scope, p_conversation_id, p_tool_call_id,
                                               v_fork, v_tool.name, v_input, v_epoch);
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = p_conversation_id AND e.scope_key = v_scope_key;
        IF FOUND THEN
            v_decision := 'reuse';
        ELSE
            -- Re-run candidates come from other messages at the same fork point
            -- (the calls of this very message are on its path by definition):
            -- two ranges of tool_effect_calls_fork_idx skip this message's
            -- calls, so N calls in one message cost N lookups, not N squared.
            -- A candidate on this message's path (an earlier call of the same
            -- agent turn) is no re-run: the path's segments are read once and
            -- each candidate's message looked up against them (is_on_segments),
            -- not walked again.
            SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_seg_branches, v_seg_depths
              FROM convo_private.path_segments(p_conversation_id, p_message_id) s;
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = p_conversation_id
               AND (l.fork_point_id = v_fork OR (v_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < p_message_id OR l.message_id > p_message_id)
               AND e.tool_name = p_tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_segments(p_conversation_id, l.message_id, v_seg_branches, v_seg_depths)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        SELECT * INTO v_money FROM convo_private.effect_money(v_input, v_tool.amount_arg, v_tool.currency_arg);
        -- Each CASE searched: Citus sends a simple CASE over a variable to
        -- the node as a comparison of text with boolean.
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, requested_at, deadline_at, settled_at, http_status, error_code)
        VALUES
            (p_conversation_id, v_id, v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE WHEN v_decision = 'execute' THEN 'pending' WHEN v_decision = 'confirm' THEN 'awaiting_confirmation'
                  ELSE 'failed' END,
             v_input, v_money.amount_minor, v_money.currency,
             v_repeats, v_now,
             v_now + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN v_now END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.effect_event(p_conversation_id, v_effect.id, 'requested', v_effect.state, convo_private.caller(),
                                           CASE WHEN v_decision = 'rejected'
                                                THEN jsonb_build_object('errors', to_jsonb(v_errors)) ELSE '{}' END);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id, tool_name, tool_version)
    VALUES (p_conversation_id, p_tool_call_id, p_message_id, p_ordinal, v_effect.id, v_decision, v_fork,
            v_tool.name, v_tool.version);
END;
$$;

-- register_tool_in: register_tool's work on the allowlist stored in
-- p_tools: convo.tools on one server; on a distributed database, where
-- convo.tools is on every node, each node's copy of it, written by a call
-- on that node (route_register_tool) in one transaction. The arguments
-- checked, then, under a lock on the tool's name, the same settings return
-- the latest version and others make the next one.
CREATE OR REPLACE FUNCTION convo_private.register_tool_in(
    p_tools             text,
    p_name              text,
    p_effectful         boolean,
    p_args_schema       jsonb,
    p_idempotency_scope text,
    p_deadline          interval,
    p_amount_arg        text,
    p_currency_arg      text)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_latest convo.tools;
    v_n      bigint;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$' THEN
        RAISE EXCEPTION 'invalid tool name %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', coalesce(quote_literal(p_name), 'NULL')),
                  HINT = 'A tool name is 1 to 128 characters of A-Z, a-z, 0-9, _, . and -, not starting with a digit.';
    END IF;
    IF p_effectful IS NULL OR p_args_schema IS NULL OR p_deadline IS NULL OR p_idempotency_scope IS NULL THEN
        RAISE EXCEPTION 'p_effectful, p_args_schema, p_idempotency_scope and p_deadline are required'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name);
    END IF;
    IF p_idempotency_scope NOT IN ('tool_call', 'conversation_args', 'fork_args') THEN
        RAISE EXCEPTION 'unknown idempotency scope %', quote_literal(p_idempotency_scope)
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name), HINT = 'Scopes are tool_call, conversation_args and fork_args.';
    END IF;
    IF p_deadline <= interval '0' THEN
        RAISE EXCEPTION 'the deadline must be positive' USING ERRCODE = 'CV011', DETAIL = format('tool %s, deadline %s', p_name, p_deadline);
    END IF;
    PERFORM convo_private.check_size('the argument schema', p_args_schema, convo.max_request_bytes());
    PERFORM convo_private.check_args_schema(p_args_schema);
    IF (p_amount_arg IS NOT NULL OR p_currency_arg IS NOT NULL) AND NOT p_effectful THEN
        RAISE EXCEPTION 'only an effectful tool has amount and currency arguments'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s', p_name);
    END IF;
    IF p_amount_arg IS NOT NULL AND NOT coalesce(p_args_schema -> 'properties' ? p_amount_arg, false)
       OR p_currency_arg IS NOT NULL AND NOT coalesce(p_args_schema -> 'properties' ? p_currency_arg, false) THEN
        RAISE EXCEPTION 'the amount and currency arguments must be properties of the schema'
            USING ERRCODE = 'CV011', DETAIL = format('tool %s, amount %s, currency %s', p_name, p_amount_arg, p_currency_arg);
    END IF;

    -- Versions of one tool are numbered under a lock on its name.
    PERFORM pg_advisory_xact_lock(hashtext('convo.tools'), hashtext(p_name));
    EXECUTE format('SELECT * FROM %s t WHERE t.name = $1 ORDER BY t.version DESC LIMIT 1', p_tools)
       INTO v_latest USING p_name;
    IF v_latest.name IS NOT NULL AND v_latest.effectful = p_effectful AND v_latest.args_schema::text = p_args_schema::text
       AND v_latest.idempotency_scope = p_idempotency_scope
       -- '1 day' and '24 hours' compare equal but differ across a DST change: compare as written.
       AND v_latest.deadline::text = p_deadline::text
       AND v_latest.amount_arg IS NOT DISTINCT FROM p_amount_arg
       AND v_latest.currency_arg IS NOT DISTINCT FROM p_currency_arg THEN
        RETURN v_latest.version;
    END IF;
    -- Under REPEATABLE READ a version another transaction committed while
    -- this one waited for the lock is invisible here: ON CONFLICT then fails
    -- with a retryable 40001, never a 23505.
    EXECUTE format('INSERT INTO %s (name, version, effectful, args_schema, idempotency_scope, deadline, amount_arg, currency_arg)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                    ON CONFLICT (name, version) DO NOTHING', p_tools)
      USING p_name, coalesce(v_latest.version, 0) + 1, p_effectful, p_args_schema, p_idempotency_scope, p_deadline,
            p_amount_arg, p_currency_arg;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n = 0 THEN
        RAISE EXCEPTION 'tool % got a new version from another transaction: retry', p_name
            USING ERRCODE = 'serialization_failure', DETAIL = format('tool %s, version %s', p_name, coalesce(v_latest.version, 0) + 1);
    END IF;
    RETURN coalesce(v_latest.version, 0) + 1;
END;
$$;

-- stale_generations_in: the rows of stale_generations_rows read from the
-- relations named: convo.generations and convo.conversations on one server; on
-- a distributed database, one node's shards of them that hold the same
-- conversations (stale_generations_on_node).
CREATE OR REPLACE FUNCTION convo_private.stale_generations_in(p_generations text, p_conversations text)
RETURNS TABLE (conversation_id uuid, generation_id uuid, model text, prompt_message_id uuid, started_at timestamptz)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('
    SELECT g.conversation_id, g.id, g.model, g.prompt_message_id, g.started_at
      FROM %1$s g
      JOIN %2$s c ON c.id = g.conversation_id
     WHERE g.state = ''streaming''
       AND g.started_at < clock_timestamp() - convo.generation_stale_after()
       AND convo_private.sees_owner(c.owner_id)', p_generations, p_conversations);
END;
$$;

-- stale_generations_rows: the rows of the view convo.stale_generations
-- (generations still streaming after generation_stale_after()), the
-- caller's owner's only (sees_owner). A PL/pgSQL function, SECURITY
-- DEFINER, like orphaned_applied_effects_rows: no condition of a caller's
-- reaches its scans, nor does EXPLAIN show them.
CREATE OR REPLACE FUNCTION convo_private.stale_generations_rows()
RETURNS TABLE (conversation_id uuid, generation_id uuid, model text, prompt_message_id uuid, started_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    RETURN QUERY SELECT * FROM convo_private.stale_generations_in('convo.generations', 'convo.conversations');
END;
$$;

-- stale_pending_effects_in: the rows of stale_pending_effects_rows read from the
-- relations named: convo.tool_effects and convo.conversations on one server; on
-- a distributed database, one node's shards of them that hold the same
-- conversations (stale_pending_effects_on_node).
CREATE OR REPLACE FUNCTION convo_private.stale_pending_effects_in(p_tool_effects text, p_conversations text)
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, state text, idempotency_key text,
               requested_at timestamptz, deadline_at timestamptz)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('
    SELECT e.conversation_id, e.id, e.tool_name, e.state, e.idempotency_key, e.requested_at, e.deadline_at
      FROM %1$s e
      JOIN %2$s c ON c.id = e.conversation_id
     WHERE e.state IN (''pending'', ''awaiting_confirmation'')
       AND e.deadline_at < clock_timestamp()
       AND convo_private.sees_owner(c.owner_id)', p_tool_effects, p_conversations);
END;
$$;

-- stale_pending_effects_rows: the rows of the view
-- convo.stale_pending_effects (effects pending or awaiting confirmation
-- past their deadline), the caller's owner's only (sees_owner). A
-- PL/pgSQL function, SECURITY DEFINER, like orphaned_applied_effects_rows:
-- no condition of a caller's reaches its scans, nor does EXPLAIN show them.
CREATE OR REPLACE FUNCTION convo_private.stale_pending_effects_rows()
RETURNS TABLE (conversation_id uuid, effect_id uuid, tool_name text, state text, idempotency_key text,
               requested_at timestamptz, deadline_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    RETURN QUERY SELECT * FROM convo_private.stale_pending_effects_in('convo.tool_effects', 'convo.conversations');
END;
$$;

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
--   writes no ledger row (and, a restore, may hold an erased attachment);
--   the head to move to, why and by whom (p_head NULL: the head stays).
-- It reads each existing parent once and computes depth, sibling position
-- and branch (a first child continues its parent's branch, a later sibling
-- starts one); checks every part against its message (part_problem), each
-- tool call id unique in the conversation and each result naming a call of
-- its parent; inserts the messages and their keyed parts (keyed_parts:
-- calls, results, attachments) as sets; records each tool call's ledger
-- decision (record_tool_call); and moves the head, with the conversation's
-- last activity (log_head_move: the head log, the live path, the
-- notification). The tables' triggers only guard
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
-- Its statements are shaped by the arrays, not their values: a plan made
-- for one call serves every call (PostgreSQL would otherwise plan them anew
-- each time, at a cost above the statements').
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n       int := coalesce(cardinality(p_ids), 0);
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
                convo_private.other_conversation(p_conversation_id, 'convo.messages', 'id', p_parents[v_missing]::text));
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
                  FROM unnest(p_roles, p_parts, p_reasons) WITH ORDINALITY AS m (role, parts, reason, i)
                UNION ALL
                SELECT m.i, e.n::int, e.part ->> 'type',
                       CASE WHEN v_restore AND e.part ->> 'type' = 'attachment' AND e.part = convo_private.redact_part(e.part)
                                 AND jsonb_typeof(e.part -> 'media_type') = 'string' AND e.part ->> 'media_type' <> ''
                            THEN NULL ELSE convo_private.part_problem(e.part, m.role) END
                  FROM unnest(p_roles, p_parts) WITH ORDINALITY AS m (role, parts, i),
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
              FROM unnest(p_parts) WITH ORDINALITY AS m (parts, i),
                   jsonb_array_elements(m.parts) AS e (part)
             WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use' AND e.part ->> 'id' IS NOT NULL;
            SELECT x.i, x.ordinal, x.problem INTO v_link_i, v_link_ordinal, v_link_problem FROM (
                SELECT c.i, c.n::int AS ordinal,
                       ARRAY['CV008', format('tool call id %s is already used in this conversation', c.id),
                             format(', tool call %s', c.id), ''] AS problem
                  FROM (SELECT m.i, e.n, e.part ->> 'id' AS id,
                               count(*) OVER (PARTITION BY e.part ->> 'id' ORDER BY m.i, e.n) AS nth
                          FROM unnest(p_parts) WITH ORDINALITY AS m (parts, i),
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
                          FROM unnest(p_parts, p_parents) WITH ORDINALITY AS m (parts, parent_id, i),
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
                      DETAIL = format('a new %s message in conversation %s, parent %s', coalesce(p_roles[v_bad_i], 'NULL'),
                                      p_conversation_id, coalesce(p_parents[v_bad_i]::text, 'none (a root)'))
                               || CASE WHEN v_bad_ordinal > 0 THEN format(', part %s', v_bad_ordinal - 1) ELSE '' END
                               || v_problem[3];
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
        IF v_keyed THEN
            INSERT INTO convo.keyed_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name)
            SELECT p_conversation_id, m.id, (e.n - 1)::int, e.part ->> 'type',
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'id'
                        WHEN e.part ->> 'type' = 'tool_result' THEN e.part ->> 'tool_use_id' END,
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
        -- The conversation's last activity moves with its head: now, or for
        -- an import the latest original time it writes.
        UPDATE convo.conversations c
           SET head_message_id = p_head,
               last_activity_at = CASE WHEN p_import_id IS NULL OR p_times IS NULL THEN v_now
                                       ELSE coalesce((SELECT max(t) FROM unnest(p_times) AS t), v_now) END
         WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_head_move(p_conversation_id, p_head, p_old_head, p_head_reason, p_moved_by, p_import_id);
    END IF;
END;
$$;

-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), by what it guards: append_only (refuse_change,
-- refuse_forgery), head_log (the conversation's guards and the logging of
-- direct head, title and archive updates), rule (the tree's and the
-- ledger's guards, the state machines) and row_security (a role row-level
-- security binds refused before the guards that run as the owner role read
-- a row for it). Each table's triggers are numbered
-- in the order they fire (PostgreSQL fires the triggers of one timing, event
-- and level by name): 05 whom row-level security binds, 10 and 11 who may write and what a new or changed row
-- may hold, 20 what a row must be (or, after the write, its log), 30 an
-- UPDATE refused or logged, 90 append-only. self_check requires each present and
-- ENABLE ALWAYS (a view's are enabled as views allow), and no other trigger
-- on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversations', 'conversations_05_row_security', 'row_security'),
        ('conversations', 'conversations_10_guard', 'head_log'),
        ('conversations', 'conversations_11_new_guard', 'head_log'),
        ('conversations', 'conversations_12_head_guard', 'head_log'),
        ('conversations', 'conversations_20_log_direct', 'head_log'),
        ('conversations', 'conversations_21_log_direct_change', 'head_log'),
        ('conversations', 'conversations_90_no_delete', 'append_only'),
        ('conversation_changes', 'conversation_changes_10_no_forgery', 'append_only'),
        ('conversation_changes', 'conversation_changes_30_no_update', 'append_only'),
        ('conversation_changes', 'conversation_changes_90_append_only', 'append_only'),
        ('messages', 'messages_05_row_security', 'row_security'),
        ('messages', 'messages_20_guard', 'rule'),
        ('messages', 'messages_30_no_update', 'append_only'),
        ('messages', 'messages_90_append_only', 'append_only'),
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only'),
        ('keyed_parts', 'keyed_parts_20_guard', 'rule'),
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only'),
        ('live_path', 'live_path_10_no_forgery', 'append_only'),
        ('generations', 'generations_05_row_security', 'row_security'),
        ('generations', 'generations_20_transition', 'rule'),
        ('generations', 'generations_90_no_delete', 'append_only'),
        ('tools', 'tools_10_no_forgery', 'append_only'),
        ('tools', 'tools_90_append_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_90_fixed', 'append_only'),
        ('tool_effects', 'tool_effects_10_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_20_transition', 'rule'),
        ('tool_effects', 'tool_effects_30_log_direct', 'rule'),
        ('tool_effects', 'tool_effects_90_no_delete', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_10_no_forgery', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_90_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_10_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_30_no_update', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_90_append_only', 'append_only'),
        ('tool_receipts', 'tool_receipts_10_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_20_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_90_no_delete', 'append_only'),
        ('erasures', 'erasures_10_no_forgery', 'append_only'),
        ('erasures', 'erasures_90_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_10_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_90_append_only', 'append_only'),
        ('owner_erasures', 'owner_erasures_10_no_forgery', 'append_only'),
        ('owner_erasures', 'owner_erasures_90_append_only', 'append_only'),
        ('import_origins', 'import_origins_10_no_forgery', 'append_only'),
        ('import_origins', 'import_origins_30_no_update', 'append_only'),
        ('import_origins', 'import_origins_90_append_only', 'append_only'),
        ('imports', 'imports_10_no_forgery', 'append_only'),
        ('imports', 'imports_30_no_update', 'append_only'),
        ('imports', 'imports_90_append_only', 'append_only'),
        ('message_parts', 'message_parts_10_refuse', 'append_only')) AS t (table_name, trigger_name, guards);
END;

-- owner_erasures_10_no_forgery: only erase_owner (or a superuser) records
-- an erasure of an owner's receipts.
CREATE OR REPLACE TRIGGER owner_erasures_10_no_forgery
    BEFORE INSERT ON convo.owner_erasures
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.owner_erasures ENABLE ALWAYS TRIGGER owner_erasures_10_no_forgery;

-- owner_erasures_90_append_only: the record of erasures is append-only.
CREATE OR REPLACE TRIGGER owner_erasures_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.owner_erasures
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.owner_erasures ENABLE ALWAYS TRIGGER owner_erasures_90_append_only;

-- Give convo_owner what this migration created, then grant as documented.
SELECT convo_private.hand_over_objects();
SELECT convo_private.apply_grants();

-- Give back a membership taken above.
-- (A membership the role granted itself; one another role granted stays.)
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                WHERE m.roleid = 'convo_owner'::regrole AND m.member = current_user::regrole
                  AND m.grantor = m.member) THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_user);
    END IF;
END;
$$;
