-- sees_owner: whether the caller may read an owner's rows. A convo_app
-- session sees only the owner named by SET LOCAL convo.owner_id: unset
-- (NULL in a session that never set it, '' after a SET LOCAL ended) it sees
-- no one. A caller (convo_private.caller: the role set by SET ROLE, else
-- the login role) that is a member of convo_reader (or convo_admin, or a
-- superuser) sees every owner. The API functions run as the owner role, so
-- they ask once per call. No SET clause: the body is bound when it is
-- created, and the planner inlines it.
CREATE OR REPLACE FUNCTION convo_private.sees_owner(p_owner_id text)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN coalesce(p_owner_id = current_setting('convo.owner_id', true), false)
    OR pg_has_role(convo_private.caller()::name, 'convo_reader', 'USAGE');
