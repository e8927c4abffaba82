-- place_answer: a generation's answer written as an assistant child of its
-- prompt, for complete_generation and, with what was streamed before a stop
-- or a failure (p_incomplete), for cancel_generation and fail_generation:
-- 'regenerate' when the prompt already has an assistant answer
-- (write_messages makes any other later child a 'branch'), and the head
-- follows only if it is where it was at begin_generation (p_head, the head
-- its caller read under the lock), so a late answer does not yank a tab that
-- moved on; a head moved away and back again counts as unmoved. An
-- incomplete answer holds no tool call (CV008): a call cut off mid-stream
-- never ran, and the ledger must not decide on it. Returns the message.
CREATE OR REPLACE FUNCTION convo_private.place_answer(
    p_conversation_id uuid,
    p_head            uuid,
    p_generation      convo.generations,
    p_parts           jsonb,
    p_incomplete      boolean)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_message uuid := gen_random_uuid();
    v_reason  text;
BEGIN
    IF p_incomplete AND jsonb_typeof(p_parts) = 'array'
       AND EXISTS (SELECT 1 FROM jsonb_array_elements(p_parts) e (part) WHERE e.part ->> 'type' = 'tool_use') THEN
        RAISE EXCEPTION 'a stopped or failed answer keeps its text and attachments, not a tool call: the call never ran'
            USING ERRCODE = 'CV008',
                  DETAIL = format('conversation %s, generation %s', p_conversation_id, p_generation.id),
                  HINT = 'Leave the partial tool_use parts out of p_parts.';
    END IF;
    v_reason := CASE WHEN EXISTS (SELECT 1 FROM convo.messages c
                                   WHERE c.conversation_id = p_conversation_id
                                     AND c.parent_id = p_generation.prompt_message_id
                                     AND c.role = 'assistant') THEN 'regenerate' END;
    PERFORM convo_private.write_messages(p_conversation_id, p_head,
        p_messages => ARRAY[(v_message, p_generation.prompt_message_id, 'assistant', p_parts, v_reason,
                             NULL, p_incomplete)::convo_private.new_message],
        p_head => CASE WHEN p_head IS NOT DISTINCT FROM p_generation.head_at_begin THEN v_message END,
        p_head_reason => CASE WHEN v_reason = 'regenerate' THEN 'regenerate' ELSE 'append' END);
    RETURN v_message;
END;
$$;
