-- log_head_move: what follows a head's move, in the transaction that made
-- it: one conversation_head_log row (seq numbered per conversation, under
-- the conversation's lock), the live path moved with it, and the convo_head
-- notification (when notifies says so; the payload holds ids, seq and reason
-- only, never content, the owner or the mover: LISTEN is not owner-scoped).
-- write_messages calls it for pgconvo's own moves, with the reason, mover
-- and import they were given; log_direct_head_move (trigger
-- conversations_20_log_direct) for an UPDATE outside the API
-- (direct_update, by the caller). An append (the new head a child of the
-- old one) extends the live path by one UPDATE or INSERT; any other move
-- goes to move_live_path.
CREATE OR REPLACE FUNCTION convo_private.log_head_move(
    p_conversation_id uuid,
    p_head            uuid,
    p_old_head        uuid,
    p_reason          text,
    p_moved_by        text,
    p_import_id       uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq    bigint;
    v_depth  int;
    v_parent uuid;
    v_sib    int;
BEGIN
    INSERT INTO convo.conversation_head_log
        (conversation_id, seq, head_message_id, previous_head_id, moved_by, reason, import_id)
    SELECT p_conversation_id, coalesce(max(l.seq), 0) + 1, p_head, p_old_head, p_moved_by, p_reason, p_import_id
      FROM convo.conversation_head_log l
     WHERE l.conversation_id = p_conversation_id
    RETURNING seq INTO v_seq;

    -- An append that continues the head's branch (the new head its first
    -- child) grows the last segment, in one statement; anything else reads
    -- the new head and moves the path.
    UPDATE convo.live_path l SET max_depth = m.depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head AND m.parent_id = p_old_head AND m.sibling_index = 1
       AND l.conversation_id = p_conversation_id AND l.branch_id = m.branch_id AND l.max_depth = m.depth - 1;
    IF NOT FOUND THEN
        SELECT m.depth, m.parent_id, m.sibling_index INTO v_depth, v_parent, v_sib
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = p_head;
        IF p_old_head IS NOT NULL AND v_parent = p_old_head AND v_sib > 1 THEN
            -- A later child starts a branch of its own: one new segment.
            INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth)
            VALUES (p_conversation_id, v_depth, p_head, v_depth);
        ELSE
            PERFORM convo_private.move_live_path(p_conversation_id, p_head);
        END IF;
    END IF;

    IF convo_private.notifies() THEN
        PERFORM pg_notify('convo_head', json_build_object(
            'conversation_id', p_conversation_id, 'seq', v_seq, 'head_message_id', p_head,
            'previous_head_id', p_old_head, 'reason', p_reason)::text);
    END IF;
END;
$$;
