-- conversations: an owner's conversations for a sidebar, latest activity
-- first (ties by id, descending), p_limit at a time (1 to 1,000), archived
-- ones only with p_archived. Keyset-paged: pass the last row's
-- last_activity_at and conversation_id as p_before and p_before_id for the
-- next page, so no conversation is skipped or repeated between pages even
-- when many share one time (an import); p_before alone means strictly
-- older. A deleted conversation (delete_conversation) and an erased one
-- (erase_conversation, erase_owner, erase_due) are never listed: the
-- sidebar index holds neither. One range scan of conversations_sidebar_idx. A convo_app session
-- lists only the owner it set (CV011 for another); convo_reader any.
-- last_activity_at is the time of the conversation's last head move through
-- the API (a message that became the head, or a switch to another branch;
-- an import's: its latest message's original time, when it has one).
CREATE OR REPLACE FUNCTION convo.conversations(
    p_owner_id  text,
    p_limit     int DEFAULT 50,
    p_before    timestamptz DEFAULT NULL,
    p_archived  boolean DEFAULT false,
    p_before_id uuid DEFAULT NULL)
RETURNS TABLE (conversation_id uuid, title text, created_at timestamptz, last_activity_at timestamptz,
               head_message_id uuid, archived boolean)
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
BEGIN
    PERFORM convo_private.check_sidebar(p_owner_id, p_limit, p_before, p_archived, p_before_id);
    -- One query for every page: the first page's key is past every row
    -- ('infinity'), and p_before alone is before every row of that time
    -- (the nil uuid), so one range scan serves all three.
    RETURN QUERY
    SELECT c.id, c.title, c.created_at, c.last_activity_at, c.head_message_id, c.archived
      FROM convo.conversations c
     WHERE c.owner_id = p_owner_id AND c.archived = p_archived AND c.deleted_at IS NULL AND c.erased_at IS NULL
       AND (c.last_activity_at, c.id) < (coalesce(p_before, 'infinity'),
                                         coalesce(p_before_id, CASE WHEN p_before IS NULL THEN 'ffffffff-ffff-ffff-ffff-ffffffffffff'
                                                                    ELSE '00000000-0000-0000-0000-000000000000' END::uuid))
     ORDER BY c.last_activity_at DESC, c.id DESC
     LIMIT p_limit;
END;
$$;

COMMENT ON FUNCTION convo.conversations(text, integer, timestamp with time zone, boolean, uuid) IS
    'An owner''s conversations, latest activity first, keyset-paged (p_before, p_before_id: the last row of the previous page): a chat sidebar.';
