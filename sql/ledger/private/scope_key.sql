-- scope_key: the key under which a tool call is the same request as
-- another, by its tool's idempotency scope: tool_call (the call itself),
-- conversation_args (conversation, tool, canonical input) or fork_args (the
-- same and the fork point; NULL stands for the conversation); and a
-- rejected call's own key ('rejected': the call itself, never shared). Keyed
-- (keyed_digest) so that it outlives an erasure of the input. From the
-- first erasure on, the key epoch (key_epoch: the conversation's erasures
-- before the call) is part of the digested text, so no call after an erasure
-- shares a key with one before it: a guess of erased arguments is never told
-- from another guess (by a reuse, or a collision with the kept key). At
-- epoch 0 the text is what it was before epochs, so no stored key changes.
-- The one rule: record_tool_call decides by it, import_conversation keys a
-- restored effect by it, and ledger_problems checks stored keys against it.
CREATE OR REPLACE FUNCTION convo_private.scope_key(
    p_scope           text,
    p_conversation_id uuid,
    p_tool_call_id    text,
    p_fork            uuid,
    p_tool_name       text,
    p_input           jsonb,
    p_epoch           int)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_epoch IS NULL OR p_epoch < 0 THEN
        RAISE EXCEPTION 'a key epoch is a count of erasures, not %', coalesce(p_epoch::text, 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN p_scope || ':' || convo_private.keyed_digest(encode(sha256(convert_to(
        CASE WHEN p_epoch > 0 THEN 'epoch ' || p_epoch || '|' ELSE '' END ||
        CASE p_scope
            WHEN 'tool_call' THEN p_conversation_id || '|' || p_tool_call_id
            WHEN 'rejected' THEN p_conversation_id || '|' || p_tool_call_id
            WHEN 'conversation_args' THEN p_conversation_id || '|' || p_tool_name || '|' || p_input::text
            WHEN 'fork_args' THEN p_conversation_id || '|' || coalesce(p_fork::text, 'conversation')
                                  || '|' || p_tool_name || '|' || p_input::text
        END, 'UTF8')), 'hex'));
END;
$$;
