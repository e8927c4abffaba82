-- 0013_live_path_append down: reverses 0013_live_path_append.up.sql.

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

-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. SECURITY DEFINER: it is
-- the one writer of the head log besides a superuser. The reason and mover
-- come from move_head_to (pgconvo's own moves) or conversations_guard (any
-- other UPDATE: direct_update by session_user); it clears them after use.
-- An import (is_import) writes the exported log rows instead. Every move,
-- an import's too, moves the live-path index (move_live_path) with the head.
CREATE OR REPLACE FUNCTION convo_private.log_head_move()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason   text := nullif(current_setting('convo.head_reason', true), '');
    v_moved_by text := nullif(current_setting('convo.head_moved_by', true), '');
BEGIN
    PERFORM convo_private.move_live_path(NEW.id, NEW.head_message_id);
    -- An import writes the exported head log itself, the move to its head included.
    IF convo_private.is_import(NEW.id) THEN
        RETURN NULL;
    END IF;
    IF v_reason IS NULL THEN
        v_reason := 'direct_update';
        v_moved_by := session_user;
    END IF;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;

-- move_live_path: keeps convo.live_path, the derived index of the live path,
-- equal to the path from the root to p_head_id. It walks up from the new head
-- only until it meets a message already on the live path (the fork), drops
-- the rows below the fork and inserts the walked ones: an append costs one
-- step, a switch the messages that change, never the whole conversation.
-- Called by log_head_move, so every head move, the API's or a direct UPDATE,
-- moves the index in the same transaction.
CREATE OR REPLACE FUNCTION convo_private.move_live_path(p_conversation_id uuid, p_head_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id      uuid := p_head_id;
    v_depth   int;
    v_parent  uuid;
    v_fork    int := -1;
    v_ids     uuid[] := '{}';
    v_depths  int[] := '{}';
    v_parents uuid[] := '{}';
BEGIN
    WHILE v_id IS NOT NULL LOOP
        SELECT m.depth, m.parent_id INTO v_depth, v_parent
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
        IF EXISTS (SELECT 1 FROM convo.live_path l
                    WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth AND l.message_id = v_id) THEN
            v_fork := v_depth;
            EXIT;
        END IF;
        v_ids := array_append(v_ids, v_id);
        v_depths := array_append(v_depths, v_depth);
        v_parents := array_append(v_parents, v_parent);
        IF v_parent IS NOT NULL AND EXISTS (
               SELECT 1 FROM convo.live_path l
                WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth - 1 AND l.message_id = v_parent) THEN
            v_fork := v_depth - 1;
            EXIT;
        END IF;
        v_id := v_parent;
    END LOOP;
    DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id AND l.depth > v_fork;
    IF cardinality(v_ids) > 0 THEN
        INSERT INTO convo.live_path (conversation_id, depth, message_id, sibling_count)
        SELECT p_conversation_id, w.depth, w.id,
               coalesce((SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE s.conversation_id = p_conversation_id AND s.parent_id = w.parent_id),
                        (SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE w.parent_id IS NULL AND s.conversation_id = p_conversation_id AND s.parent_id IS NULL))
          FROM unnest(v_ids, v_depths, v_parents) AS w (id, depth, parent_id);
    END IF;
END;
$$;

-- Table changes reversed, below the objects.
DROP FUNCTION convo_private.move_live_path(uuid, uuid, uuid);

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
