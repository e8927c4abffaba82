-- 0017_live_path_rows down: reverses 0017_live_path_rows.up.sql.

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

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. One index range scan of convo.live_path (the derived index of
-- the live path, kept by every head move) joined to the messages, so it costs
-- close to reading a flat list however often the conversation was edited.
-- CV002 for an unknown conversation; empty before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    RETURN QUERY
    SELECT l.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           l.sibling_count
      FROM convo.live_path l
      JOIN convo.messages m ON m.conversation_id = p_conversation_id AND m.id = l.message_id
     WHERE l.conversation_id = p_conversation_id
     ORDER BY l.depth;
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet. When nothing on the live path changed after p_at
-- (the head then is the head now, and no live_path row is newer), that path
-- is the live-path index, read as path reads it; otherwise it is walked from
-- the tree (path_from).
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid := convo.head_at(p_conversation_id, p_at);
BEGIN
    IF v_head IS NOT DISTINCT FROM (convo_private.conversation_ref(p_conversation_id)).head_message_id
       AND NOT EXISTS (SELECT 1 FROM convo.live_path l
                        WHERE l.conversation_id = p_conversation_id AND l.since > p_at) THEN
        RETURN QUERY
        SELECT l.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
               l.sibling_count
          FROM convo.live_path l
          JOIN convo.messages m ON m.conversation_id = p_conversation_id AND m.id = l.message_id
         WHERE l.conversation_id = p_conversation_id
         ORDER BY l.depth;
    ELSE
        RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, v_head, p_at);
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';

DROP FUNCTION convo_private.live_path_rows;

-- Reverse the table changes here, below the objects.

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
