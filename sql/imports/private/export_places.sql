-- export_places: the arrays of an export document and the table each
-- holds rows of, for what names a document's row by its table
-- (import_conversation's refusals, unreadable_row).
CREATE OR REPLACE FUNCTION convo_private.export_places()
RETURNS TABLE (key text, tab text)
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    SELECT * FROM (VALUES ('messages', 'messages'), ('head_log', 'conversation_head_log'),
                          ('changes', 'conversation_changes'), ('generations', 'generations'),
                          ('tool_calls', 'tool_effect_calls'), ('effects', 'tool_effects'),
                          ('effect_events', 'tool_effect_events'), ('tools', 'tools'), ('erasures', 'erasures'),
                          ('origins', 'import_origins'), ('imports', 'imports')) AS p (key, tab);
END;
