-- export_row_name: how a refusal names a row of an export document: by its
-- id, else its seq, its call id, its message, its tool's name, else 'no
-- id' (import_conversation's refusals, unreadable_row).
CREATE OR REPLACE FUNCTION convo_private.export_row_name(p_row jsonb)
RETURNS text
LANGUAGE sql
IMMUTABLE
RETURN coalesce('id ' || (p_row ->> 'id'), 'seq ' || (p_row ->> 'seq'), 'call ' || (p_row ->> 'tool_call_id'),
                'message ' || (p_row ->> 'message_id'), 'name ' || (p_row ->> 'name'), 'no id');
