-- check_sidebar: the arguments of conversations() (a sidebar page), checked
-- before any row is read: the owner this session may see (check_sees_owner:
-- CV011 for another), a limit of 1 to 1,000, p_archived given, and p_before_id only
-- with p_before. On a distributed database each node's part of the page
-- checks them too.
CREATE OR REPLACE FUNCTION convo_private.check_sidebar(
    p_owner_id  text,
    p_limit     int,
    p_before    timestamptz,
    p_archived  boolean,
    p_before_id uuid)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.check_sees_owner(p_owner_id);
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 1000, not %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF p_archived IS NULL THEN
        RAISE EXCEPTION 'p_archived must be true or false'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF p_before_id IS NOT NULL AND p_before IS NULL THEN
        RAISE EXCEPTION 'p_before_id goes with p_before: both are the last row of the previous page'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, p_before_id %s', p_owner_id, p_before_id);
    END IF;
END;
$$;
