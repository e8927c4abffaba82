-- sees_conversation: whether the caller may read (p_write false) or change
-- (p_write true) a conversation of p_owner_id deleted at p_deleted_at (NULL:
-- not deleted): the owner check of every call that names a conversation.
-- Its owner's (sees_owner to read, writes_owner to change), and, once
-- deleted, a caller's that acts for every owner: to one that acts for the
-- owner alone (convo_app, owner set) a deleted conversation does not exist,
-- as another owner's does not; a member of convo_reader reads it (an abuse
-- report) and of convo_admin changes it (a charge in flight settled,
-- restore_deleted_conversation, erasure). No SET clause, as sees_owner: the
-- planner inlines it.
CREATE OR REPLACE FUNCTION convo_private.sees_conversation(p_owner_id text, p_deleted_at timestamptz, p_write boolean)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN CASE WHEN p_write THEN convo_private.writes_owner(p_owner_id) ELSE convo_private.sees_owner(p_owner_id) END
   AND (p_deleted_at IS NULL
        OR pg_has_role(convo_private.caller()::name, CASE WHEN p_write THEN 'convo_admin' ELSE 'convo_reader' END, 'USAGE'));
