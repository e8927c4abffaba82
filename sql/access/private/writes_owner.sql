-- writes_owner: whether the caller may change an owner's rows: the owner
-- named by SET LOCAL convo.owner_id, or every owner for a caller
-- (convo_private.caller) that is a member of convo_admin (or a superuser).
-- convo_reader reads across owners but writes nothing.
CREATE OR REPLACE FUNCTION convo_private.writes_owner(p_owner_id text)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN coalesce(p_owner_id = current_setting('convo.owner_id', true), false)
    OR pg_has_role(convo_private.caller()::name, 'convo_admin', 'USAGE');
