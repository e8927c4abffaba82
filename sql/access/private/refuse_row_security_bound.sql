-- refuse_row_security_bound: the trigger function that runs before the
-- guards which run as the owner role (SECURITY DEFINER) on a write made
-- outside pgconvo's code. Those guards fire before row-level security's
-- check, and would otherwise read rows and answer about them (a parent's
-- depth and time in a DETAIL, which conversation a message id is in, CV002
-- against 42501) to a role that policies let read and write none. A caller
-- (the role SET ROLE set, else the login role, as convo_private.caller
-- says) that is neither a superuser, nor BYPASSRLS, nor the tables' owner
-- role (whose sessions row-level security does not bind) is refused here
-- (42501), before any row is read: the package grants no policy to write,
-- so row-level security would refuse it anyway. It runs with the writer's
-- rights and reads the catalog only. Statement-level, so it refuses even
-- when no row matches.
CREATE OR REPLACE FUNCTION convo_private.refuse_row_security_bound()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- convo_private.caller's rule, written out: this function runs with the
    -- writer's rights, which hold no USAGE on convo_private.
    v_caller text := coalesce(nullif(current_setting('role'), 'none'), session_user::text);
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles r
                WHERE r.rolname = v_caller
                  AND (r.rolsuper OR r.rolbypassrls OR pg_has_role(r.oid, 'convo_owner', 'USAGE'))) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'row-level security lets role % write no row of convo.%', v_caller, TG_TABLE_NAME
        USING ERRCODE = '42501',
              DETAIL = format('table convo.%s, operation %s, role %s', TG_TABLE_NAME, TG_OP, v_caller),
              HINT = 'Write through the API (convo.*); a repair role needs BYPASSRLS.';
END;
$$;
