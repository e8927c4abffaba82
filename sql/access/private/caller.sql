-- caller: who calls, for every owner check and every who-column: the role
-- set by SET ROLE or SET LOCAL ROLE when one is set, else the login role.
-- Inside a SECURITY DEFINER function current_user is the owner role, but the
-- role setting is still the session's, so a login that switches to an
-- application role (a pooler, PostgREST, a superuser trying the
-- application's view) has that role's rights only and is recorded as it.
-- SQL with no SET clause, so the planner inlines it.
CREATE OR REPLACE FUNCTION convo_private.caller()
RETURNS text
LANGUAGE sql
STABLE
RETURN coalesce(nullif(current_setting('role'), 'none'), session_user::text);
