-- import_nodes: the nodes of an import's source tree (a ChatGPT mapping,
-- Open WebUI's history.messages, or the nodes import_librechat makes of a
-- LibreChat export: {parent, at, node, children when read} by messageId),
-- numbered in bytewise key order, each with its source parent's key, its
-- children list, its message (NULL or not an object: not imported), the
-- node verbatim and its own time, if any.
CREATE OR REPLACE FUNCTION convo_private.import_nodes(p_source text, p_mapping jsonb)
RETURNS TABLE (idx int, key text, parent_key text, children jsonb, message jsonb, node jsonb, at timestamptz)
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT (row_number() OVER (ORDER BY e.key COLLATE "C"))::int, e.key,
           e.node ->> CASE p_source WHEN 'openwebui' THEN 'parentId' ELSE 'parent' END,
           e.node -> CASE p_source WHEN 'openwebui' THEN 'childrenIds' ELSE 'children' END,
           CASE p_source WHEN 'chatgpt' THEN e.node -> 'message' WHEN 'librechat' THEN e.node -> 'node' ELSE e.node END,
           CASE p_source WHEN 'librechat' THEN e.node -> 'node' ELSE e.node END,
           CASE p_source WHEN 'chatgpt' THEN convo_private.epoch_time(e.node -> 'message' -> 'create_time', NULL)
                         WHEN 'librechat' THEN (e.node ->> 'at')::timestamptz
                ELSE convo_private.epoch_time(e.node -> 'timestamp', 1e11) END
      FROM jsonb_each(p_mapping) AS e (key, node);
END;
