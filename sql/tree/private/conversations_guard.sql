-- conversations_guard: of a conversation only the head, the title, the
-- archive state and the deletion may change (each logged; a deletion is
-- made now and never moved), its last activity only with its head's moves
-- through the API, and its metadata and erased_at only by erasure (pgconvo's
-- erase_content): its id, owner and creation time are fixed, and a head once
-- set is never unset (the head always names a message). It runs for every UPDATE that changes a fixed
-- column or unsets the head, and for every UPDATE outside pgconvo's code
-- (its WHEN, from package_triggers: not the owner role, or the owner role
-- only because a session SET ROLE or SET SESSION AUTHORIZATION to it), so
-- that past the fixed columns' checks the UPDATE is an outsider's.
CREATE OR REPLACE FUNCTION convo_private.conversations_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'a conversation''s id, owner_id and created_at never change'
            USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id);
    END IF;
    IF OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL THEN
        RAISE EXCEPTION 'the head of a conversation cannot be unset'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, head %s', OLD.id, OLD.head_message_id);
    END IF;
    -- Past the checks above, the trigger's WHEN let this UPDATE through
    -- only because it comes from outside pgconvo's code.
    IF NEW.last_activity_at IS DISTINCT FROM OLD.last_activity_at THEN
        RAISE EXCEPTION 'a conversation''s last_activity_at moves only with its head, through the API'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user);
    END IF;
    IF NEW.erased_at IS DISTINCT FROM OLD.erased_at THEN
        RAISE EXCEPTION 'a conversation''s erased_at is set by its first erasure, and only so'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user),
                  HINT = 'Content is removed only by convo.erase_conversation, convo.erase_owner or convo.erase_due.';
    END IF;
    -- A deletion from outside (logged by log_direct_change) is one now, as
    -- delete_conversation's: not backdated, which would make it due for
    -- erasure before its time, nor moved once made; and an erased
    -- conversation is not brought back, as restore_deleted_conversation
    -- refuses it.
    IF NEW.deleted_at IS DISTINCT FROM OLD.deleted_at
       AND (OLD.erased_at IS NOT NULL OR (NEW.deleted_at IS NOT NULL
            AND (OLD.deleted_at IS NOT NULL OR NEW.deleted_at < transaction_timestamp() OR NEW.deleted_at > clock_timestamp()))) THEN
        RAISE EXCEPTION 'a conversation is deleted now, its deletion time never moves, and an erased one''s deletion never changes'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, deleted_at %s to %s, role %s',
                                  OLD.id, OLD.deleted_at, NEW.deleted_at, current_user),
                  HINT = 'Delete it with convo.delete_conversation.';
    END IF;
    IF NEW.metadata::text IS DISTINCT FROM OLD.metadata::text THEN
        RAISE EXCEPTION 'convo.conversations is append-only: its metadata changes only by erasure'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user),
                  HINT = 'Content is removed only by convo.erase_conversation or convo.erase_owner.';
    END IF;
    RETURN NEW;
END;
$$;
