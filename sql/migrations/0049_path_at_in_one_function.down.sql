-- 0049_path_at_in_one_function down: reverses 0049_path_at_in_one_function.up.sql.

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

-- path_from: the path from the root to p_head_id, depth 0 first, as path
-- returns it: the segments of the live-path index when p_head_id is the
-- head (the path to a message never changes), else walked from the tree
-- (path_segments), each segment one index range scan. sibling_count comes
-- from the few siblings after the first (messages_forks_idx), read once
-- into an object by parent that each row looks up (as path does), counting,
-- when p_at is given, only those created by then: the "< 1/2 >" the
-- customer saw at that instant (sibling_index is creation order, so it holds).
CREATE OR REPLACE FUNCTION convo_private.path_from(p_conversation_id uuid, p_head_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int,
               incomplete boolean)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branches uuid[];
    v_depths   int[];
    v_forks    jsonb;  -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    IF p_head_id IS NULL THEN
        RETURN;
    END IF;
    IF p_head_id = (SELECT c.head_message_id FROM convo.conversations c WHERE c.id = p_conversation_id) THEN
        SELECT array_agg(l.branch_id), array_agg(l.max_depth) INTO v_branches, v_depths
          FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    ELSE
        SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_branches, v_depths
          FROM convo_private.path_segments(p_conversation_id, p_head_id) s;
    END IF;
    SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n) INTO v_forks
      FROM (SELECT f.parent_id, max(f.sibling_index) AS n
              FROM convo.messages f
             WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
               AND (p_at IS NULL OR f.created_at <= p_at)
             GROUP BY f.parent_id) f;
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END,
           m.incomplete
      FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
END;
$$;

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet: the path to the head of that instant (head_at),
-- which never changes, read as path_from reads it.
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int,
               incomplete boolean)
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
    RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at), p_at);
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';

-- Reverse the table changes here, below the objects.

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
