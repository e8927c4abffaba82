-- 0036_erasure_leaves_no_answer down: reverses 0036_erasure_leaves_no_answer.up.sql.

-- Act as the owner role: a migrating role that is not a superuser becomes
-- a member for this transaction only (it needs CREATEROLE for that).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- begin_receipt: the receipt row first, in pending, before the model fills
-- any argument: one allowlisted tool, its version frozen here. A repeat with
-- the same owner and key returns the first row (created = false); the same
-- key with another tool or request raises CV009. A key whose receipt was
-- erased (erase_owner, at or after its creation) raises CV009 for any
-- request, in words that name no request: the kept digest is never compared
-- with a guess. A convo_app session files receipts only for the owner it set
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
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not create receipts for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
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
    IF EXISTS (SELECT 1 FROM convo.erasures r
                WHERE r.owner_id = v_receipt.owner_id AND r.conversation_id IS NULL
                  AND r.erased_at >= v_receipt.created_at) THEN
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

-- create_conversation: a new conversation; with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
-- Retry-safe through p_conversation_id: the same call returns the same id.
-- A convo_app session creates only for the owner it set (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.create_conversation(
    p_owner_id        text,
    p_system_prompt   text DEFAULT NULL,
    p_metadata        jsonb DEFAULT '{}',
    p_conversation_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id       uuid := coalesce(p_conversation_id, gen_random_uuid());
    v_existing convo.conversations;
    v_taken    boolean := false;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
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
        RAISE EXCEPTION 'this session may not create conversations for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
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
    IF p_conversation_id IS NOT NULL THEN
        PERFORM FROM convo.conversations c WHERE c.id = v_id;
        v_taken := FOUND;
    END IF;
    IF NOT v_taken THEN
        INSERT INTO convo.conversations (id, owner_id, metadata)
        VALUES (v_id, p_owner_id, p_metadata)
        ON CONFLICT (id) DO NOTHING;
        v_taken := NOT FOUND; -- a concurrent call with the same id came first
    END IF;
    IF v_taken THEN
        -- The same owner, metadata and system prompt return the first
        -- result; anything else, another owner's id included, is CV009.
        -- Locked only if it is this owner's.
        SELECT * INTO v_existing FROM convo.conversations c
         WHERE c.id = v_id AND c.owner_id = p_owner_id
           FOR NO KEY UPDATE;
        -- The system prompt is the message the 'create' move named, whatever
        -- was appended since; compared as text, like the metadata.
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata::text IS DISTINCT FROM p_metadata::text
           OR (SELECT m.parts FROM convo.conversation_head_log l
                 JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.head_message_id
                WHERE l.conversation_id = v_id AND l.reason = 'create')::text IS DISTINCT FROM v_parts::text THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        RETURN v_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        PERFORM convo_private.write_messages(v_id, NULL, ARRAY[v_root], ARRAY[NULL::uuid], ARRAY['system'],
                                             ARRAY[v_parts], NULL, NULL, NULL, v_root, 'create', NULL);
    END IF;
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.create_conversation(text, text, jsonb, uuid) IS
    'New conversation for an owner; a system prompt becomes the root message and the head. Retry-safe by p_conversation_id.';

-- erase_owner: erase_conversation for every conversation of an owner, and
-- the owner's receipts (request, arguments, expected values), in one
-- transaction; each conversation's erasure and the receipts' are recorded
-- on their own. An owner with nothing stored is not an error. convo_admin's;
-- the caller (convo_private.caller, not a SECURITY DEFINER helper's owner)
-- must be one that may write for the owner, else CV011.
CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL or empty';
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    -- The caller may erase only an owner it may write for (writes_owner:
    -- every owner for convo_admin, else the one its session set), as
    -- erase_conversation may erase only such a conversation; checked before
    -- any lock is taken. CV011, as begin_receipt answers another owner.
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not erase owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Erase as a member of convo_admin, or set convo.owner_id to the owner erased.';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s', p_owner_id);
    END IF;
    -- Lock the owner's conversations in one order, each by its key, as every
    -- writer would.
    FOR v_id IN SELECT c.id FROM convo.conversations c WHERE c.owner_id = p_owner_id ORDER BY c.id LOOP
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
    END LOOP;
    RETURN QUERY
    SELECT e.place, sum(e.rows_redacted)::bigint
      FROM (SELECT x.* FROM convo.conversations c
                  CROSS JOIN LATERAL convo_private.erase_content(p_owner_id, c.id, p_reason) x
             WHERE c.owner_id = p_owner_id
            UNION ALL
            SELECT y.* FROM convo_private.erase_content(p_owner_id, NULL, p_reason) y) e
     GROUP BY e.place
     ORDER BY e.place;
END;
$$;

COMMENT ON FUNCTION convo.erase_owner(text, text) IS
    'Erase the content of every conversation and receipt of an owner, keeping their shape; recorded with p_reason.';

-- check_import_owner: the owner checks of an import, as create_conversation
-- makes them: an owner is required, at most max_id_length characters, and
-- a convo_app session imports only for the owner it set (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo_private.check_import_owner(p_owner_id text)
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
        RAISE EXCEPTION 'this session may not import conversations for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
END;
$$;

-- erase_content: one erasure, recorded first in convo.erasures, then
-- written: every row of the conversation that holds content becomes its
-- redact_row, or, with no conversation, every receipt of the owner. It is
-- the one piece of pgconvo that updates content: the tables refuse every
-- UPDATE of content from outside pgconvo's code. Rows already redacted are left alone, so a repeat changes
-- nothing and returns no rows, but is recorded. One row per place (table)
-- where rows changed, also recorded in convo.erasure_places.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_place   record;
    v_n       bigint;
BEGIN
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    -- Each place: its table, the columns redact_row changes, and the key
    -- that selects the conversation's (or the owner's) rows.
    FOR v_place IN
        SELECT * FROM (VALUES
            ('messages', 'parts', 'conversation_id'),
            ('conversations', 'metadata, title', 'id'),
            ('conversation_changes', 'old_value, new_value', 'conversation_id'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id'),
            ('tool_effects', 'arguments', 'conversation_id'),
            ('tool_effect_events', 'evidence', 'conversation_id'),
            ('import_origins', 'node', 'conversation_id'),
            ('imports', 'source_key, digest', 'conversation_id'),
            ('tool_receipts', 'request, arguments, expected', 'owner_id')) AS p (tab, cols, key)
         WHERE (p.tab = 'tool_receipts') = (p_conversation_id IS NULL)
    LOOP
        EXECUTE format('UPDATE convo.%1$I t SET (%2$s) = (SELECT %2$s FROM jsonb_populate_record(NULL::convo.%1$I,
                            convo_private.redact_row(%1$L, to_jsonb(t))))
                         WHERE t.%3$I = $1::%4$s AND to_jsonb(t)::text <> convo_private.redact_row(%1$L, to_jsonb(t))::text',
                       v_place.tab, v_place.cols, v_place.key,
                       CASE WHEN p_conversation_id IS NULL THEN 'text' ELSE 'uuid' END)
        USING CASE WHEN p_conversation_id IS NULL THEN p_owner_id ELSE p_conversation_id::text END;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
            VALUES (p_owner_id, v_erasure, v_place.tab, v_n);
            place := v_place.tab;
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
END;
$$;

-- import_key: the one rule for an import's ids (docs/importing.md,
-- "Ids"): the source key (the export's own id, else 'sha:' and the keyed
-- digest of the JSON), the conversation id md5 of the jsonb array (format,
-- owner, source key), whose text no other (owner, source key) pair shares
-- (a plain 'format:owner:key' let owner 'acme' with source '42:foo' take
-- the id of owner 'acme:42' with source 'foo'), where to say the import was
-- going in a DETAIL (p_label names the format), and the keyed digest of the
-- source text that tells a repeat (import_repeat). A repeat is found by
-- owner, format and source key, never by recomputing the id: ids given
-- under the earlier rule stay valid.
-- A document without an id of its own is keyed by its digest under this
-- database's secret (keyed_digest), not by a plain md5 of its text, so
-- that its conversation id, which erasure keeps, cannot be checked against
-- guessed documents; one imported under the earlier md5 rule is still found
-- under its key. And an erasure leaves no answer that tells whether a new
-- document is the erased one: where the id is held by a conversation whose
-- import an erasure emptied of its source key, the next id of the same
-- rule is taken ([format, owner, source key, n]), so that document imports
-- anew like any other; an export's own id is no content, and its erased
-- import stays CV009 (import_tree).
CREATE OR REPLACE FUNCTION convo_private.import_key(
    p_kind     text,
    p_label    text,
    p_owner_id text,
    p_source   text,
    p_doc      jsonb,
    OUT source          text,
    OUT conversation_id uuid,
    OUT place           text,
    OUT digest          text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n int := 0;
BEGIN
    digest := convo_private.keyed_digest(encode(sha256(convert_to(p_doc::text, 'UTF8')), 'hex'));
    source := p_source;
    IF source IS NULL THEN
        SELECT i.source_key INTO source FROM convo.imports i
         WHERE i.owner_id = p_owner_id AND i.format = p_kind AND i.import_id IS NULL
           AND i.source_key = 'sha:' || md5(p_doc::text);
        source := coalesce(source, 'sha:' || digest);
    END IF;
    conversation_id := md5(jsonb_build_array(p_kind, p_owner_id, source)::text)::uuid;
    IF p_source IS NULL THEN
        WHILE EXISTS (SELECT 1 FROM convo.imports i
                       WHERE i.conversation_id = import_key.conversation_id AND i.import_id IS NULL
                         AND i.source_key IS NULL) LOOP
            v_n := v_n + 1;
            conversation_id := md5(jsonb_build_array(p_kind, p_owner_id, source, v_n)::text)::uuid;
        END LOOP;
    END IF;
    place := format('%s %s of owner %s, conversation %s', p_label, source, p_owner_id, conversation_id);
END;
$$;

SELECT convo_private.apply_grants();

-- redact_row: what erasure leaves of a row of a table that holds content,
-- the row given and returned as jsonb: the one place that says what erasure
-- redacts. It keeps the shape (ids, times, states, amounts, currencies,
-- external references, who did what) and empties the content: message parts
-- (their one copy, the message's array), conversation metadata, its title
-- and the titles in its change log,
-- generation params, request digest, usage and error detail, effect
-- arguments, event evidence, an imported message's source node, an
-- import's source key and digest, a receipt's request, arguments and expected values. Idempotent. erase_content,
-- the one place that updates content, writes it.
CREATE OR REPLACE FUNCTION convo_private.redact_row(p_table text, p_row jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN p_row || CASE p_table
    WHEN 'messages' THEN jsonb_build_object('parts',
        (SELECT jsonb_agg(convo_private.redact_part(e.part) ORDER BY e.n)
           FROM jsonb_array_elements(p_row -> 'parts') WITH ORDINALITY AS e (part, n)))
    WHEN 'conversations' THEN '{"metadata": {}, "title": null}'::jsonb
    WHEN 'conversation_changes' THEN CASE WHEN p_row ->> 'field' = 'title'
                                          THEN '{"old_value": null, "new_value": null}'::jsonb ELSE '{}'::jsonb END
    WHEN 'generations' THEN jsonb_build_object('params', '{}'::jsonb, 'request_digest', NULL,
        'usage', CASE WHEN jsonb_typeof(p_row -> 'usage') <> 'null' THEN '{}'::jsonb END,
        'error', CASE WHEN jsonb_typeof(p_row -> 'error') <> 'null' THEN '{}'::jsonb END)
    WHEN 'tool_effects' THEN '{"arguments": {}}'::jsonb
    WHEN 'tool_effect_events' THEN '{"evidence": {}}'::jsonb
    WHEN 'import_origins' THEN '{"node": {"erased": true}}'::jsonb
    WHEN 'imports' THEN '{"source_key": null, "digest": null}'::jsonb
    WHEN 'tool_receipts' THEN jsonb_build_object('request', '{}'::jsonb,
        'arguments', CASE WHEN jsonb_typeof(p_row -> 'arguments') <> 'null' THEN '{}'::jsonb END,
        'expected', CASE WHEN jsonb_typeof(p_row -> 'expected') <> 'null' THEN '{}'::jsonb END)
END;

DROP FUNCTION convo_private.hold_owner;

-- Reverse the table changes here, below the objects.
ALTER TABLE convo.tool_receipts DISABLE TRIGGER tool_receipts_10_no_forgery;
ALTER TABLE convo.tool_receipts DISABLE TRIGGER tool_receipts_20_transition;
UPDATE convo.tool_receipts SET request_digest = 'erased' WHERE request_digest IS NULL;
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_10_no_forgery;
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_20_transition;
ALTER TABLE convo.tool_receipts DROP CONSTRAINT tool_receipts_request_digest_erased;
ALTER TABLE convo.tool_receipts ALTER COLUMN request_digest SET NOT NULL;

SELECT convo_private.apply_grants();

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
