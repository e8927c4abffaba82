-- 0013_live_path_append: an append moves the live-path index with one INSERT, any
-- other move with one upsert (move_live_path learns the old head).

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
DROP FUNCTION convo_private.move_live_path(uuid, uuid);

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
    PERFORM convo_private.move_live_path(NEW.id, NEW.head_message_id, OLD.head_message_id);
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
-- equal to the path from the root to p_head_id. An append (the new head a
-- child of the old one, the last row) is one INSERT. Any other move walks up
-- from the new head only until it meets a message already on the live path
-- (the fork), writes the walked rows over those at their depths (an upsert:
-- the same key, so a HOT update, no index churn) and drops the rows below
-- the new head: a switch costs the messages that change, never the whole
-- conversation. Its statements are key lookups, so their generic plans are
-- right; without force_generic_plan PostgreSQL kept planning them anew on
-- every call (the arrays and the range look worth it), about 150 µs a move.
CREATE OR REPLACE FUNCTION convo_private.move_live_path(p_conversation_id uuid, p_head_id uuid, p_old_head_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_id         uuid := p_head_id;
    v_depth      int;
    v_parent     uuid;
    v_head_depth int;
    v_old_depth  int;
    v_ids        uuid[] := '{}';
    v_depths     int[] := '{}';
    v_parents    uuid[] := '{}';
BEGIN
    SELECT m.depth, m.parent_id INTO v_head_depth, v_parent
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head_id;
    IF p_head_id IS NOT NULL AND v_parent IS NOT DISTINCT FROM p_old_head_id AND p_old_head_id IS NOT NULL THEN
        INSERT INTO convo.live_path (conversation_id, depth, message_id, sibling_count)
        VALUES (p_conversation_id, v_head_depth, p_head_id,
                (SELECT max(s.sibling_index) FROM convo.messages s
                  WHERE s.conversation_id = p_conversation_id AND s.parent_id = v_parent));
        RETURN;
    END IF;
    v_depth := v_head_depth;
    WHILE v_id IS NOT NULL LOOP
        IF EXISTS (SELECT 1 FROM convo.live_path l
                    WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth AND l.message_id = v_id) THEN
            EXIT;
        END IF;
        v_ids := array_append(v_ids, v_id);
        v_depths := array_append(v_depths, v_depth);
        v_parents := array_append(v_parents, v_parent);
        IF v_parent IS NULL OR EXISTS (
               SELECT 1 FROM convo.live_path l
                WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth - 1 AND l.message_id = v_parent) THEN
            EXIT;
        END IF;
        v_id := v_parent;
        SELECT m.depth, m.parent_id INTO v_depth, v_parent
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
    END LOOP;
    IF cardinality(v_ids) > 0 THEN
        INSERT INTO convo.live_path AS l (conversation_id, depth, message_id, sibling_count)
        SELECT p_conversation_id, w.depth, w.id,
               coalesce((SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE s.conversation_id = p_conversation_id AND s.parent_id = w.parent_id),
                        (SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE w.parent_id IS NULL AND s.conversation_id = p_conversation_id AND s.parent_id IS NULL))
          FROM unnest(v_ids, v_depths, v_parents) AS w (id, depth, parent_id)
            ON CONFLICT (conversation_id, depth) DO UPDATE
           SET message_id = excluded.message_id, sibling_count = excluded.sibling_count, since = clock_timestamp();
    END IF;
    -- The rows below the new head, if the old path went deeper.
    SELECT m.depth INTO v_old_depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_old_head_id;
    IF p_head_id IS NULL OR v_old_depth > v_head_depth THEN
        DELETE FROM convo.live_path l
         WHERE l.conversation_id = p_conversation_id AND l.depth > coalesce(v_head_depth, -1);
    END IF;
END;
$$;

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
