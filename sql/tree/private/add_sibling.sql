-- add_sibling: what edit_and_resend and regenerate share: a new message
-- beside an existing one (same parent), the head moved to it, through
-- write_messages. No existing row changes; the old subtree simply stops
-- being on the path.
CREATE OR REPLACE FUNCTION convo_private.add_sibling(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid,
    p_new_message_id  uuid,
    p_moved_by        text,
    p_role            text,
    p_branch_reason   text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head     uuid := convo_private.lock_conversation(p_conversation_id);
    v_original convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
    v_id       uuid := coalesce(p_new_message_id, gen_random_uuid());
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id);
    END IF;
    IF p_new_message_id IS NOT NULL
       AND convo_private.is_retry(p_conversation_id, p_new_message_id, p_role, p_parts, v_original.parent_id, true) THEN
        RETURN p_new_message_id;
    END IF;
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    IF v_original.role <> p_role THEN
        RAISE EXCEPTION '% takes a message of role %; message % has role %',
                CASE p_branch_reason WHEN 'user_edit' THEN 'edit_and_resend' ELSE 'regenerate' END,
                p_role, p_message_id, v_original.role
            USING ERRCODE = 'CV004', DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head,
        p_messages => ARRAY[(v_id, v_original.parent_id, p_role, p_parts, p_branch_reason, NULL, false)::convo_private.new_message],
        p_head => v_id, p_head_reason => p_branch_reason, p_moved_by => p_moved_by);
    RETURN v_id;
END;
$$;
