-- record_tool_call_planned: record_tool_call with every statement planned
-- for its call (its own, its helpers' and the foreign key checks of its
-- inserts), for a message's later calls: a message of N calls grows the
-- ledger within one statement, and a plan cached while the tables were
-- nearly empty (a sequential scan, or a scan of the conversation's rows by
-- another index) would make each call cost the calls before it.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call_planned(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_ordinal         int,
    p_tool_call_id    text,
    p_tool_name       text,
    p_input           jsonb,
    p_branch_id       uuid,
    p_depth           int)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    PERFORM convo_private.record_tool_call(p_conversation_id, p_message_id, p_ordinal, p_tool_call_id,
                                           p_tool_name, p_input, p_branch_id, p_depth);
END;
$$;
