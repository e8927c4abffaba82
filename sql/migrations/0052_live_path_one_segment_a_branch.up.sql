-- 0052_live_path_one_segment_a_branch: convo.live_path holds at most one segment a branch, by a unique constraint: the live path runs through a branch once (a tree's path never comes back to a branch it left), which pgconvo's writes kept and only a write past the guards could break; a conversation whose index already breaks it is rebuilt from the tree first.

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

-- A conversation with a branch on two rows of its index (only a write past
-- the guards makes one; self_check reports it as live_path_index) gets its
-- index rebuilt from the tree and its head, as self_check's repair does.
SELECT convo_private.rebuild_live_path(d.conversation_id)
  FROM (SELECT DISTINCT l.conversation_id FROM convo.live_path l
         GROUP BY l.conversation_id, l.branch_id HAVING count(*) > 1) d;

-- One segment a branch; its index also finds a branch's segment, which
-- move_live_path and record_tool_call look up.
ALTER TABLE convo.live_path
    ADD CONSTRAINT live_path_branch_key UNIQUE (conversation_id, branch_id);

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
