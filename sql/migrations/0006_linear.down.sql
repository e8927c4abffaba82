-- 0006_linear down: reverses 0006_linear.up.sql.

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

-- alternatives: a message and its siblings, oldest first ("you previously
-- asked ..."): whether each is on the live path, and the most recently
-- created leaf below it, to switch to with move_head.
CREATE OR REPLACE FUNCTION convo.alternatives(p_conversation_id uuid, p_message_id uuid)
RETURNS TABLE (message_id uuid, branch_reason text, created_at timestamptz, on_head_path boolean,
               latest_leaf_id uuid)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head    uuid := (convo_private.conversation_ref(p_conversation_id)).head_message_id;
    v_message convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
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
           convo_private.is_on_path(p_conversation_id, s.id, v_head),
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

-- fork_point_of: the fork point of a tool call's message: the parent of the
-- nearest person's turn at or above it (a user message with a part other
-- than tool_result: messages that only carry tool results belong to the
-- agent loop). NULL stands for the conversation itself: that turn has no
-- parent, or there is no such turn.
CREATE OR REPLACE FUNCTION convo_private.fork_point_of(p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    WITH RECURSIVE up AS (
        SELECT m.id, m.parent_id, m.role, m.depth
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id
        UNION ALL
        SELECT p.id, p.parent_id, p.role, p.depth
          FROM up
          JOIN convo.messages p ON p.conversation_id = p_conversation_id AND p.id = up.parent_id
    )
    SELECT up.parent_id
      FROM up
     WHERE up.role = 'user'
       AND EXISTS (SELECT 1 FROM convo.message_parts pp
                    WHERE pp.conversation_id = p_conversation_id AND pp.message_id = up.id
                      AND pp.type <> 'tool_result')
     ORDER BY up.depth DESC
     LIMIT 1;
END;

-- message_parts_check: every part is well formed for its type and fits its
-- message's role, and is exactly the element of messages.parts it claims to
-- be (so the two never disagree); derives type, tool_call_id and tool_name
-- from the body (CHECK constraints tie them together).
CREATE OR REPLACE FUNCTION convo_private.message_parts_check()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_msg  convo.messages;
    v_body jsonb := NEW.body;
    v_type text;
    v_where text;
BEGIN
    v_msg := convo_private.message_ref(NEW.conversation_id, NEW.message_id);
    -- The part and where its message was going, not the message's own id:
    -- a refused part means the message is not stored either.
    v_where := format('part %s of a new %s message in conversation %s, parent %s', NEW.ordinal, v_msg.role,
                      NEW.conversation_id, coalesce(v_msg.parent_id::text, 'none (a root)'));
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
        -- A tool call id is unique within its conversation through a btree
        -- index, whose entries are capped at about 2.7 kB: max_id_length's
        -- 255 characters (1020 bytes at most) stay well under it.
        IF length(v_body ->> 'id') > convo_private.max_id_length() THEN
            RAISE EXCEPTION 'a tool call id is at most % characters', convo_private.max_id_length()
                USING ERRCODE = 'CV010', DETAIL = format('%s, a tool call id of %s characters', v_where, length(v_body ->> 'id'));
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
        IF length(v_body ->> 'tool_use_id') > convo_private.max_id_length() THEN
            RAISE EXCEPTION 'a tool call id is at most % characters', convo_private.max_id_length()
                USING ERRCODE = 'CV010', DETAIL = format('%s, a tool_use_id of %s characters', v_where, length(v_body ->> 'tool_use_id'));
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

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment. An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered).
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
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = NEW.conversation_id
               AND e.tool_name = NEW.tool_name
               AND l.fork_point_id IS NOT DISTINCT FROM v_fork
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

-- refuse_forgery: the trigger function behind every table whose rows are
-- history (head log, effect events, call links, the ledger, receipts, the
-- allowlist): only pgconvo's own code writes them. It runs as the owner role
-- (SECURITY DEFINER functions owned by convo_owner, which nobody logs in as),
-- so any other current_user is refused, whatever table privileges it holds;
-- a superuser, who could drop the trigger anyway, is let through.
-- Statement-level (ENABLE ALWAYS), so it refuses even when no row matches.
CREATE OR REPLACE FUNCTION convo_private.refuse_forgery()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_user = 'convo_owner'
       OR (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'convo.% is written only by pgconvo''s functions: % by role % is refused',
            TG_TABLE_NAME, TG_OP, current_user
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, operation %s, role %s, session user %s',
                              TG_TABLE_NAME, TG_OP, current_user, session_user),
              HINT = 'History is written through the API (convo.*), which logs who did what.';
END;
$$;

-- package_triggers: every trigger pgconvo puts on its tables, by what it
-- guards: append_only (refuse_change, refuse_forgery), head_log (the head
-- log's writer and the guard that names direct updates) and rule (the tree,
-- the state machines, the ledger). self_check requires each present and
-- ENABLE ALWAYS, and no other trigger on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversation_head_log', 'conversation_head_log_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_no_forgery', 'append_only'),
        ('conversations', 'conversations_no_delete', 'append_only'),
        ('conversations', 'conversations_erasure_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_fixed', 'append_only'),
        ('generations', 'generations_no_delete', 'append_only'),
        ('message_parts', 'message_parts_append_only', 'append_only'),
        ('message_parts', 'message_parts_erasure_only', 'append_only'),
        ('messages', 'messages_append_only', 'append_only'),
        ('messages', 'messages_erasure_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_append_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_erasure_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_no_delete', 'append_only'),
        ('tool_effects', 'tool_effects_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_delete', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_forgery', 'append_only'),
        ('erasures', 'erasures_append_only', 'append_only'),
        ('erasures', 'erasures_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_no_forgery', 'append_only'),
        ('tools', 'tools_append_only', 'append_only'),
        ('tools', 'tools_no_forgery', 'append_only'),
        ('conversations', 'conversations_guard', 'head_log'),
        ('conversations', 'conversations_head_log', 'head_log'),
        ('generations', 'generations_transition', 'rule'),
        ('message_parts', 'message_parts_check', 'rule'),
        ('message_parts', 'message_parts_record_tool_call', 'rule'),
        ('messages', 'messages_fill_tree', 'rule'),
        ('messages', 'messages_split_parts', 'rule'),
        ('tool_effects', 'tool_effects_log', 'rule'),
        ('tool_effects', 'tool_effects_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_transition', 'rule')) AS t (table_name, trigger_name, guards);
END;

DROP TRIGGER message_parts_no_forgery ON convo.message_parts;

-- Table changes reversed, below the objects.
DROP INDEX convo.tool_effect_calls_fork_idx;

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
