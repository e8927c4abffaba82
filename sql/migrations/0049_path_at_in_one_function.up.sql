-- 0049_path_at_in_one_function: path_at reads in one function, as path does: the owner check, the head of the instant, the live-path index and the sibling counts in one statement, the messages in a second; path_from, which only it called, is gone.

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

-- path_from was path_at's second function (path_at now reads the path itself).
DROP FUNCTION convo_private.path_from(uuid, uuid, timestamptz);

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet. One function, as path: a first statement checks
-- the owner (sees_conversation: CV002 otherwise, through conversation_ref),
-- finds the head of that instant (the last head-log row at or before it, as
-- head_at), and, when that is the head now, reads the live-path index
-- (convo.live_path) and the sibling counts created by then; a head of the
-- past is walked from the tree (path_segments: the path to a message never
-- changes). A second reads the messages, a range scan a segment, as path.
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
DECLARE
    v_seen     boolean;
    v_head     uuid;    -- the head at p_at
    v_live     boolean; -- whether it is the head now: the live-path index is its path
    v_branches uuid[];  -- the segments, root first: each branch
    v_depths   int[];   -- and the deepest of it on the path
    v_forks    jsonb;   -- parent id ('' for the roots) to its children's count by p_at, for parents of more than one
BEGIN
    SELECT true, h.head_message_id, h.head_message_id = c.head_message_id,
           CASE WHEN h.head_message_id = c.head_message_id THEN
               (SELECT array_agg(l.branch_id ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id) END,
           CASE WHEN h.head_message_id = c.head_message_id THEN
               (SELECT array_agg(l.max_depth ORDER BY l.min_depth) FROM convo.live_path l WHERE l.conversation_id = p_conversation_id) END,
           (SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n)
              FROM (SELECT f.parent_id, max(f.sibling_index) AS n
                      FROM convo.messages f
                     WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1 AND f.created_at <= p_at
                     GROUP BY f.parent_id) f)
      INTO v_seen, v_head, v_live, v_branches, v_depths, v_forks
      FROM convo.conversations c
      LEFT JOIN LATERAL (SELECT l.head_message_id
                           FROM convo.conversation_head_log l
                          WHERE l.conversation_id = p_conversation_id AND l.moved_at <= p_at
                          ORDER BY l.moved_at DESC, l.seq DESC
                          LIMIT 1) h ON true
     WHERE c.id = p_conversation_id AND convo_private.sees_conversation(c.owner_id, c.deleted_at, false);
    IF v_seen IS NULL THEN
        PERFORM convo_private.conversation_ref(p_conversation_id); -- CV011 or CV002
    END IF;
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'p_at is required' USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF v_head IS NULL THEN
        RETURN;
    END IF;
    IF NOT v_live THEN
        SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_branches, v_depths
          FROM convo_private.path_segments(p_conversation_id, v_head) s;
    END IF;
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

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';

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
