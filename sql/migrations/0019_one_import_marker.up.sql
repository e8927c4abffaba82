-- 0019_one_import_marker: the imports from other products mark what they are
-- writing as import_conversation does (is_import); is_imported goes.

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

-- Table changes, written by hand, go here, above the objects that use them.
DROP FUNCTION convo_private.is_imported(uuid, uuid);

-- import_tree: the shared second half of import_chatgpt, import_openwebui
-- and import_librechat, once the source is checked: the tree (import-mapping.md §4.3-§4.6, §4.10,
-- §4.12) written as one new conversation. Imported messages are the nodes
-- whose message is an object; each hangs under its nearest imported
-- ancestor (import_walk) with its original time; siblings are inserted in
-- the order (time, position in the source parent's children, key bytewise),
-- which is their sibling_index, with branch reasons by role; the head is
-- the nearest imported node at or above p_current, else the latest leaf;
-- each message's source node is kept in import_origins. Caps are checked
-- first (CV010 naming the node); no ledger row, receipt or generation is
-- written. Every step is a pass or a hash join over the nodes: linear.
CREATE OR REPLACE FUNCTION convo_private.import_tree(
    p_conversation_id uuid,
    p_owner_id        text,
    p_source          text,
    p_mapping         jsonb,
    p_current         text,
    p_conv_time       timestamptz,
    p_metadata        jsonb,
    p_where           text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_keys       text[];
    v_parent     int[];
    v_imported   boolean[];
    v_time       timestamptz[];
    v_dropped    jsonb;
    v_imp        int[];
    v_depth      int[];
    v_at         timestamptz[];
    -- the messages, in insertion order
    m_idx        int[];
    m_imp        int[];
    m_key        text[];
    m_id         uuid[];
    m_parent     uuid[];
    m_role       text[];
    m_reason     text[];
    m_parts      jsonb[];
    m_at         timestamptz[];
    m_node       jsonb[];
    v_mismatches bigint;
    v_i          int;
    v_head_idx   int;
    v_head       uuid;
    v_fallback   text;
    v_bad        record;
    v_metadata   jsonb;
BEGIN
    -- The nodes as arrays in key order, each parent as an index (0: none).
    WITH n AS MATERIALIZED (SELECT * FROM convo_private.import_nodes(p_source, p_mapping))
    SELECT coalesce(array_agg(n.key ORDER BY n.idx), '{}'),
           coalesce(array_agg(coalesce(p.idx, 0) ORDER BY n.idx), '{}'),
           coalesce(array_agg(jsonb_typeof(n.message) IS NOT DISTINCT FROM 'object' ORDER BY n.idx), '{}'),
           coalesce(array_agg(n.at ORDER BY n.idx), '{}'),
           coalesce(jsonb_object_agg(n.key, n.node) FILTER (WHERE jsonb_typeof(n.message) IS DISTINCT FROM 'object'), '{}')
      INTO v_keys, v_parent, v_imported, v_time, v_dropped
      FROM n LEFT JOIN n p ON p.key = n.parent_key;

    SELECT * INTO v_imp, v_depth, v_at
      FROM convo_private.import_walk(v_keys, v_parent, v_imported, v_time, coalesce(p_conv_time, v_now), p_where);

    -- The messages: role and parts (given the imported parent), sibling
    -- order and branch reason; and the children lists' disagreements.
    WITH n AS MATERIALIZED (
        SELECT n.*, x.imp, x.depth, x.at AS created_at
          FROM convo_private.import_nodes(p_source, p_mapping) n
          JOIN unnest(v_imp, v_depth, v_at) WITH ORDINALITY AS x (imp, depth, at, idx) ON x.idx = n.idx
    ), listed AS MATERIALIZED (
        SELECT n.key AS parent_key, c.child, min(c.ord) AS ord
          FROM n, jsonb_array_elements_text(CASE WHEN jsonb_typeof(n.children) = 'array' THEN n.children ELSE '[]' END)
                  WITH ORDINALITY AS c (child, ord)
         GROUP BY n.key, c.child
    ), m AS MATERIALIZED (
        SELECT n.idx, n.imp, n.key, n.node, n.depth, n.created_at, l.ord, p.key AS imp_parent_key,
               CASE p_source WHEN 'chatgpt' THEN convo_private.chatgpt_message(n.key, n.message, p.key, p.message)
                             WHEN 'librechat' THEN convo_private.librechat_message(n.message)
                             ELSE convo_private.openwebui_message(n.message) END AS rp
          FROM n
          LEFT JOIN n p ON p.idx = n.imp
          LEFT JOIN listed l ON l.parent_key = n.parent_key AND l.child = n.key
         WHERE jsonb_typeof(n.message) = 'object'
    ), o AS (
        SELECT m.*, m.rp ->> 'role' AS role, row_number() OVER s AS sib, first_value(m.rp ->> 'role') OVER s AS first_role
          FROM m
        WINDOW s AS (PARTITION BY m.imp ORDER BY m.created_at, m.ord NULLS LAST, m.key COLLATE "C")
    )
    SELECT array_agg(o.idx ORDER BY o.depth, o.imp, o.sib), array_agg(o.imp ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.key ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.imp_parent_key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.role ORDER BY o.depth, o.imp, o.sib),
           array_agg(CASE WHEN o.sib = 1 THEN NULL
                          WHEN o.role = 'user' AND o.first_role = 'user' THEN 'user_edit'
                          WHEN o.role = 'assistant' AND o.first_role = 'assistant' THEN 'regenerate'
                          ELSE 'branch' END ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.rp -> 'parts' ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.created_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.node ORDER BY o.depth, o.imp, o.sib),
           -- (A LibreChat message whose children were not read, every one of
           -- a flat export, lists nothing to disagree with.)
           (SELECT count(*)
              FROM (SELECT c.parent_key, c.key FROM n c JOIN n p ON p.key = c.parent_key
                     WHERE p_source <> 'librechat' OR p.children IS NOT NULL) a
              FULL JOIN listed b ON b.parent_key = a.parent_key AND b.child = a.key
             WHERE a.key IS NULL OR b.child IS NULL)
      INTO m_idx, m_imp, m_key, m_id, m_parent, m_role, m_reason, m_parts, m_at, m_node, v_mismatches
      FROM o;

    -- Caps, before anything is written: CV010 naming the first node over one.
    SELECT x.key, x.why INTO v_bad
      FROM (SELECT x.key, CASE
                   WHEN octet_length(x.parts::text) > convo.max_message_bytes()
                       THEN format('a message of %s bytes (max_message_bytes %s)', octet_length(x.parts::text), convo.max_message_bytes())
                   WHEN octet_length(x.node::text) > convo.max_message_bytes()
                       THEN format('a source node of %s bytes (max_message_bytes %s)', octet_length(x.node::text), convo.max_message_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE octet_length(p.part::text) > convo.max_part_bytes())
                       THEN format('a part over max_part_bytes %s', convo.max_part_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE p.part ->> 'type' = 'tool_use'
                                   AND octet_length((p.part -> 'input')::text) > convo.max_tool_input_bytes())
                       THEN format('a tool input over max_tool_input_bytes %s', convo.max_tool_input_bytes())
                   WHEN length(x.key) > convo_private.max_id_length() AND x.parts -> 0 ->> 'type' = 'tool_use'
                       THEN format('a tool call id (the node key) of %s characters (at most %s)', length(x.key), convo_private.max_id_length())
                   END AS why
              FROM unnest(m_key, m_parts, m_node) AS x (key, parts, node)) x
     WHERE x.why IS NOT NULL
     ORDER BY x.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the import is over a size cap at node %', v_bad.key
            USING ERRCODE = 'CV010', DETAIL = format('%s, node %s: %s', p_where, v_bad.key, v_bad.why);
    END IF;

    -- The head: the nearest imported node at or above p_current, else the latest leaf.
    IF p_current IS NOT NULL THEN
        v_i := array_position(v_keys, p_current);
        v_head_idx := CASE WHEN v_imported[v_i] THEN v_i ELSE nullif(v_imp[v_i], 0) END;
    END IF;
    IF v_head_idx IS NOT NULL THEN
        v_head := md5(p_conversation_id::text || ':' || v_keys[v_head_idx])::uuid;
    ELSE
        SELECT x.id INTO v_head
          FROM unnest(m_id, m_idx, m_at, m_key) AS x (id, idx, at, key)
         WHERE NOT EXISTS (SELECT 1 FROM unnest(m_imp) AS c (imp) WHERE c.imp = x.idx)
         ORDER BY x.at DESC, x.key COLLATE "C" DESC
         LIMIT 1;
        v_fallback := CASE WHEN v_head IS NOT NULL THEN 'latest_leaf' END;
    END IF;

    v_metadata := jsonb_build_object('import', p_metadata || jsonb_build_object(
        'dropped_nodes', v_dropped, 'children_mismatches', v_mismatches, 'head_fallback', v_fallback));
    IF octet_length(v_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'the import''s conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: metadata of %s bytes', p_where, octet_length(v_metadata::text));
    END IF;

    INSERT INTO convo.conversations (id, owner_id, metadata, created_at)
    VALUES (p_conversation_id, p_owner_id, v_metadata,
            coalesce(p_conv_time, (SELECT min(a) FROM unnest(m_at) AS a), v_now))
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- The same import committed by another session meanwhile.
        PERFORM convo_private.import_repeat(p_conversation_id, p_owner_id, p_metadata ->> 'digest', p_where);
        RETURN p_conversation_id;
    END IF;

    -- While the import's marker row names the conversation (is_import, as
    -- for import_conversation), messages_fill_tree keeps the messages' times
    -- and record_tool_call writes no ledger row. Origins (their foreign key
    -- is deferred), then the messages, parents before children, siblings in
    -- order; the head moves after the marker is gone, logged as any move.
    INSERT INTO convo_private.importing (conversation_id) VALUES (p_conversation_id);
    PERFORM set_config('convo.importing', p_conversation_id::text, true);
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT p_conversation_id, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts, created_at)
    SELECT p_conversation_id, x.id, x.parent, x.role, x.reason, x.parts, x.at
      FROM unnest(m_id, m_parent, m_role, m_reason, m_parts, m_at) WITH ORDINALITY AS x (id, parent, role, reason, parts, at, n)
     ORDER BY x.n;
    DELETE FROM convo_private.importing i WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id();
    PERFORM set_config('convo.importing', '', true);
    IF v_head IS NOT NULL THEN
        PERFORM convo_private.move_head_to(p_conversation_id, v_head, 'import', NULL);
    END IF;
    RETURN p_conversation_id;
END;
$$;

-- is_import: whether an import (import_conversation, or import_tree for the
-- imports from other products) is writing this conversation right now, in
-- this transaction: its marker row (convo_private.importing, which only the
-- imports write and delete again before they return) names the conversation
-- and this transaction. Only then do the triggers that stamp the present
-- (messages_fill_tree, log_head_move, tool_effects_log) or decide anew
-- (record_tool_call) keep the given rows instead. The setting is a
-- cheap hint that spares every other write the lookup; setting it proves nothing.
-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and
-- calling one costs tens of microseconds on every write; this returns at the
-- setting for all but an import.
CREATE OR REPLACE FUNCTION convo_private.is_import(p_conversation_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.importing', true) IS DISTINCT FROM p_conversation_id::text THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM convo_private.importing i
                    WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id());
END;
$$;

-- messages_fill_tree: checks a new message's role and parts and computes its
-- place in the tree (depth, sibling_index, branch_id, created_at) from its
-- parent, whoever inserts it, under the conversation's row lock so that
-- concurrent writers serialize. Its time is the insert's, except for a
-- message an import is writing (is_import), which keeps its original time.
-- The last sibling is read as the first row of messages_sibling_key in
-- reverse (ORDER BY ... LIMIT 1, parent_id in the order too, so that IS
-- NULL for a root keeps the index order): one probe whatever the number of
-- siblings or roots, even on statistics from when the table was empty.
-- A new sibling of a message on the live path raises that message's
-- sibling_count in convo.live_path.
CREATE OR REPLACE FUNCTION convo_private.messages_fill_tree()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parent convo.messages;
    -- Where the message was going: a refused message's own id is not named.
    v_where  text := format('a new %s message in conversation %s, parent %s', coalesce(NEW.role, 'NULL'),
                            NEW.conversation_id, coalesce(NEW.parent_id::text, 'none (a root)'));
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.role IS NULL OR NEW.role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'unknown role %', coalesce(quote_literal(NEW.role), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = v_where, HINT = 'Roles are system, user, assistant and tool.';
    END IF;
    PERFORM convo_private.check_parts(NEW.parts, v_where);
    IF NEW.parent_id IS NULL THEN
        NEW.depth := 0;
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id IS NULL
                                        ORDER BY m.parent_id DESC, m.sibling_index DESC LIMIT 1), 0) + 1;
        NEW.branch_id := NEW.id;
    ELSE
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        NEW.depth := v_parent.depth + 1;
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id = NEW.parent_id
                                        ORDER BY m.sibling_index DESC LIMIT 1), 0) + 1;
        NEW.branch_id := CASE WHEN NEW.sibling_index = 1 THEN v_parent.branch_id ELSE NEW.id END;
    END IF;
    IF NEW.sibling_index = 1 AND NEW.branch_reason IS NOT NULL THEN
        RAISE EXCEPTION 'a first child has no branch_reason'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, branch_reason %s', v_where, NEW.branch_reason);
    END IF;
    IF NEW.sibling_index > 1 AND NEW.branch_reason IS NULL THEN
        NEW.branch_reason := 'branch';
    END IF;
    IF NEW.sibling_index > 1 THEN
        UPDATE convo.live_path l
           SET sibling_count = NEW.sibling_index, since = clock_timestamp()
         WHERE l.conversation_id = NEW.conversation_id AND l.depth = NEW.depth
           AND (NEW.parent_id IS NULL
                OR EXISTS (SELECT 1 FROM convo.live_path p
                            WHERE p.conversation_id = NEW.conversation_id AND p.depth = NEW.depth - 1
                              AND p.message_id = NEW.parent_id));
    END IF;
    IF NEW.created_at IS NULL OR NOT convo_private.is_import(NEW.conversation_id) THEN
        NEW.created_at := clock_timestamp();
    END IF;
    RETURN NEW;
END;
$$;

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment. An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered), and neither
-- does a call an import is writing (is_import): the imports from other
-- products write none, that history happened elsewhere; import_conversation
-- writes its exported ledger rows itself.
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key: the call is linked to it.
--   confirm:  a re-run (same tool, same fork point, an earlier call on another
--             branch) under a new key: held in awaiting_confirmation.
--   execute:  a new pending effect under the scope key.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Planned afresh for each call: a message of N calls grows the ledger
-- within one statement, and a plan cached while the tables were nearly
-- empty (a sequential scan) would make each call cost the calls before it.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := NEW.body -> 'input';
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
    v_effect    convo.tool_effects;
    v_repeats   uuid;
    v_decision  text;
BEGIN
    IF convo_private.is_import(NEW.conversation_id) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = NEW.tool_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_fork := convo_private.fork_point_of(NEW.conversation_id, NEW.message_id);
    v_errors := CASE WHEN v_tool.effectful THEN convo.args_errors(v_tool.args_schema, v_input) END;
    IF NOT v_tool.effectful THEN
        v_decision := 'replay';
    ELSIF cardinality(v_errors) > 0 THEN
        -- Rejected calls never deduplicate: the key is the call's own.
        v_decision := 'rejected';
        v_scope_key := 'rejected:' || encode(sha256(convert_to(NEW.conversation_id || '|' || NEW.tool_call_id, 'UTF8')), 'hex');
    ELSE
        v_scope_key := v_tool.idempotency_scope || ':' || encode(sha256(convert_to(
            CASE v_tool.idempotency_scope
                WHEN 'tool_call' THEN NEW.conversation_id || '|' || NEW.tool_call_id
                WHEN 'conversation_args' THEN NEW.conversation_id || '|' || v_tool.name || '|' || v_input::text
                WHEN 'fork_args' THEN NEW.conversation_id || '|' || coalesce(v_fork::text, 'conversation')
                                      || '|' || v_tool.name || '|' || v_input::text
            END, 'UTF8')), 'hex');
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = NEW.conversation_id AND e.scope_key = v_scope_key;
        IF FOUND THEN
            v_decision := 'reuse';
        ELSE
            -- Re-run candidates come from other messages at the same fork point
            -- (the calls of this very message are on its path by definition):
            -- two ranges of tool_effect_calls_fork_idx skip this message's
            -- calls, so N calls in one message cost N lookups, not N squared.
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = NEW.conversation_id
               AND (l.fork_point_id = v_fork OR (v_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < NEW.message_id OR l.message_id > NEW.message_id)
               AND e.tool_name = NEW.tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_path(NEW.conversation_id, l.message_id, NEW.message_id)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        PERFORM convo_private.set_effect_context(NULL, CASE WHEN v_decision = 'rejected'
                                                    THEN jsonb_build_object('errors', to_jsonb(v_errors)) END);
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, deadline_at, settled_at, http_status, error_code)
        VALUES
            (NEW.conversation_id, gen_random_uuid(), v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE v_decision WHEN 'execute' THEN 'pending' WHEN 'confirm' THEN 'awaiting_confirmation' ELSE 'failed' END,
             v_input,
             CASE WHEN jsonb_typeof(v_input -> v_tool.amount_arg) = 'number'
                   AND (v_input ->> v_tool.amount_arg)::numeric = trunc((v_input ->> v_tool.amount_arg)::numeric)
                   AND abs((v_input ->> v_tool.amount_arg)::numeric) < 9e18
                  THEN (v_input ->> v_tool.amount_arg)::numeric::bigint END,
             CASE WHEN v_input ->> v_tool.currency_arg ~ '^[A-Z]{3}$' THEN v_input ->> v_tool.currency_arg END,
             v_repeats,
             clock_timestamp() + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN clock_timestamp() END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.set_effect_context(NULL, NULL);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id)
    VALUES (NEW.conversation_id, NEW.tool_call_id, NEW.message_id, NEW.ordinal, v_effect.id, v_decision, v_fork);
    RETURN NULL;
END;
$$;

-- import_origins_no_forgery: only the import functions write origin records,
-- the source nodes kept verbatim beside the messages.
CREATE OR REPLACE TRIGGER import_origins_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_no_forgery;

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
