-- import_nodes: the nodes of an import's source tree (a ChatGPT mapping or
-- Open WebUI's history.messages), numbered in bytewise key order, each with
-- its source parent's key, its children list, its message (NULL or not an
-- object: not imported), the node verbatim and its own time, if any.
CREATE OR REPLACE FUNCTION convo_private.import_nodes(p_source text, p_mapping jsonb)
RETURNS TABLE (idx int, key text, parent_key text, children jsonb, message jsonb, node jsonb, at timestamptz)
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT (row_number() OVER (ORDER BY e.key COLLATE "C"))::int, e.key,
           e.node ->> CASE p_source WHEN 'chatgpt' THEN 'parent' ELSE 'parentId' END,
           e.node -> CASE p_source WHEN 'chatgpt' THEN 'children' ELSE 'childrenIds' END,
           CASE p_source WHEN 'chatgpt' THEN e.node -> 'message' ELSE e.node END,
           e.node,
           CASE p_source WHEN 'chatgpt' THEN convo_private.epoch_time(e.node -> 'message' -> 'create_time', NULL)
                ELSE convo_private.epoch_time(e.node -> 'timestamp', 1e11) END
      FROM jsonb_each(p_mapping) AS e (key, node);
END;
