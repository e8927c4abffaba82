-- sees_deleted: whether the caller may read (p_write false) or change
-- (p_write true) a deleted conversation: to a caller that acts for one owner
-- (convo_app, owner set) a deleted conversation does not exist (CV002), as
-- to anyone else's; a member of convo_reader reads every owner's, deleted
-- ones included (an abuse report), and of convo_admin changes them (a charge
-- in flight settled, restore_deleted_conversation, erasure).
CREATE OR REPLACE FUNCTION convo_private.sees_deleted(p_write boolean)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN pg_has_role(convo_private.caller()::name, CASE WHEN p_write THEN 'convo_admin' ELSE 'convo_reader' END, 'USAGE');
