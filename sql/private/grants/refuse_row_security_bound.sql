-- refuse_row_security_bound: the first step of every guard that runs as
-- the owner role (SECURITY DEFINER) on a write made outside pgconvo's
-- code. Such a guard fires before row-level security's check, and would
-- otherwise read rows and answer about them (a parent's depth and time in a
-- DETAIL, which conversation a message id is in, CV002 against 42501) to a
-- role that policies let read and write none. A caller
-- (convo_private.caller) that is neither a superuser, nor BYPASSRLS, nor
-- the tables' owner role (whose sessions row-level security does not bind)
-- is refused here (42501) before any row is read: the package grants no
-- policy to write, so row-level security would refuse it anyway.
CREATE OR REPLACE FUNCTION convo_private.refuse_row_security_bound(p_table text, p_operation text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles r
                    WHERE r.rolname = convo_private.caller()
                      AND (r.rolsuper OR r.rolbypassrls OR pg_has_role(r.oid, 'convo_owner', 'USAGE'))) THEN
        RAISE EXCEPTION 'row-level security lets role % write no row of convo.%', convo_private.caller(), p_table
            USING ERRCODE = '42501',
                  DETAIL = format('table convo.%s, operation %s, role %s', p_table, p_operation, convo_private.caller()),
                  HINT = 'Write through the API (convo.*); a repair role needs BYPASSRLS.';
    END IF;
END;
$$;
