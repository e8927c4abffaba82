-- import_tree: the shared second half of import_chatgpt, import_openwebui
-- and import_librechat, once the source is checked: the tree (docs/importing.md: "The tree",
-- "Times", "Sibling order and branch reasons", "The head", "Nothing is
-- lost", "Repeats") written as a new conversation, or merged into the one
-- this owner imported from the same source before. Imported messages are
-- the nodes whose message is an object; each hangs under its nearest
-- imported ancestor (import_walk) with its original time, or the import's
-- where the source's is later (kept in the node); siblings are inserted in
-- the order (time, position in the source parent's children, key bytewise),
-- which is their sibling_index, with branch reasons by role; the head is
-- the nearest imported node at or above p_current, else the latest leaf;
-- each message's source node is kept in import_origins. Caps are checked
-- first (CV010 naming the node); no ledger row, receipt or generation is
-- written. The export's title becomes the conversation's (cut to
-- max_title_length; the export's own stays in the metadata), and its last
-- activity the latest message's time (a tree without messages keeps its
-- creation time). The import is recorded in convo.imports (owner, format, source
-- key, keyed digest, who, when), and every row it writes, the head-log row
-- 'import' included, names that record (import_id).
-- A message's id is its content's: the digest of its parent's id (the
-- conversation's for a root), its node key, role, parts and source time.
-- So the same node under the same parent is the same message in every
-- import, and a node that differs is another message (a sibling): a merge
-- is a set union, whose result does not depend on the order of the
-- imports. A merge writes only the messages that are not there yet, and
-- moves the head to the import's when the conversation has none or the
-- import's is later (time, then id): the head ends at the latest head any
-- import named, in any order. A merge that would write nothing writes
-- nothing, not even its record. Every step is a pass or a hash join over
-- the nodes: linear.
CREATE OR REPLACE FUNCTION convo_private.import_tree(
    p_conversation_id uuid,
    p_owner_id        text,
    p_source          text,
    p_source_key      text,
    p_digest          text,
    p_mapping         jsonb,
    p_current         text,
    p_conv_time       timestamptz,
    p_metadata        jsonb,
    p_where           text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_import     uuid := gen_random_uuid();
    v_conv       uuid;
    v_merge      boolean;
    v_old_head   uuid;
    v_keys       text[];
    v_parent     int[];
    v_imported   boolean[];
    v_time       timestamptz[];
    v_dropped    jsonb;
    v_imp        int[];
    v_depth      int[];
    v_at         timestamptz[];
    v_pos        int[];        -- a node's position among the messages (by node index)
    -- the messages, in insertion order
    m_idx        int[];
    m_imp        int[];
    m_key        text[];
    m_id         uuid[];
    m_parent     uuid[];
    m_role       text[];
    m_reason     text[];
    m_parts      jsonb[];
    m_at         timestamptz[];
    m_src        timestamptz[];
    m_node       jsonb[];
    m_new        boolean[];
    v_mismatches bigint;
    v_i          int;
    v_p          int;
    v_head_idx   int;
    v_head       uuid;
    v_move       boolean;
    v_fallback   text;
    v_bad        record;
    v_metadata   jsonb;
    v_title      text;         -- the export's title, cut to max_title_length
    v_created    timestamptz;
BEGIN
    -- The nodes as arrays in key order, each parent as an index (0: none),
    -- with the source's own times (a time after the import is clamped below,
    -- where it is stored: the id is the source's, the same in every import).
    WITH n AS MATERIALIZED (SELECT * FROM convo_private.import_nodes(p_source, p_mapping))
    SELECT coalesce(array_agg(n.key ORDER BY n.idx), '{}'),
           coalesce(array_agg(coalesce(p.idx, 0) ORDER BY n.idx), '{}'),
           coalesce(array_agg(jsonb_typeof(n.message) IS NOT DISTINCT FROM 'object' ORDER BY n.idx), '{}'),
           coalesce(array_agg(n.at ORDER BY n.idx), '{}'),
           coalesce(jsonb_object_agg(n.key, n.node) FILTER (WHERE jsonb_typeof(n.message) IS DISTINCT FROM 'object'), '{}')
      INTO v_keys, v_parent, v_imported, v_time, v_dropped
      FROM n LEFT JOIN n p ON p.key = n.parent_key;

    SELECT * INTO v_imp, v_depth, v_at
      FROM convo_private.import_walk(v_keys, v_parent, v_imported, v_time, p_conv_time, p_where);

    -- The conversation this owner imported from the same source before (a
    -- merge), else a new one under p_conversation_id.
    SELECT i.conversation_id INTO v_conv FROM convo.imports i
     WHERE i.owner_id = p_owner_id AND i.format = p_source AND i.source_key = p_source_key AND i.import_id IS NULL
     LIMIT 1;
    v_merge := FOUND;
    v_conv := coalesce(v_conv, p_conversation_id);

    -- The messages: role and parts (given the imported parent), sibling
    -- order and branch reason; and the children lists' disagreements.
    WITH n AS MATERIALIZED (
        SELECT n.*, x.imp, x.depth, x.at AS src_at
          FROM convo_private.import_nodes(p_source, p_mapping) n
          JOIN unnest(v_imp, v_depth, v_at) WITH ORDINALITY AS x (imp, depth, at, idx) ON x.idx = n.idx
    ), listed AS MATERIALIZED (
        SELECT n.key AS parent_key, c.child, min(c.ord) AS ord
          FROM n, jsonb_array_elements_text(CASE WHEN jsonb_typeof(n.children) = 'array' THEN n.children ELSE '[]' END)
                  WITH ORDINALITY AS c (child, ord)
         GROUP BY n.key, c.child
    ), m AS MATERIALIZED (
        -- A source time after the import is the import's (the node keeps
        -- the source's): nothing here is dated ahead of when it was written.
        SELECT n.idx, n.imp, n.key, n.node, n.depth, n.src_at, least(coalesce(n.src_at, v_now), v_now) AS created_at,
               l.ord, p.key AS imp_parent_key,
               CASE p_source WHEN 'chatgpt' THEN convo_private.chatgpt_message(n.key, n.message, p.key, p.message)
                             WHEN 'librechat' THEN convo_private.librechat_message(n.message)
                             ELSE convo_private.openwebui_message(n.message) END AS rp
          FROM n
          LEFT JOIN n p ON p.idx = n.imp
          LEFT JOIN listed l ON l.parent_key = n.parent_key AND l.child = n.key
         WHERE jsonb_typeof(n.message) = 'object'
    ), o AS (
        SELECT m.*, m.rp ->> 'role' AS role, row_number() OVER s AS sib, first_value(m.rp ->> 'role') OVER s AS first_role
          FROM m
        WINDOW s AS (PARTITION BY m.imp ORDER BY m.created_at, m.ord NULLS LAST, m.key COLLATE "C")
    )
    SELECT array_agg(o.idx ORDER BY o.depth, o.imp, o.sib), array_agg(o.imp ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.key ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.role ORDER BY o.depth, o.imp, o.sib),
           array_agg(CASE WHEN o.sib = 1 THEN NULL
                          WHEN o.role = 'user' AND o.first_role = 'user' THEN 'user_edit'
                          WHEN o.role = 'assistant' AND o.first_role = 'assistant' THEN 'regenerate'
                          ELSE 'branch' END ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.rp -> 'parts' ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.created_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.src_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.node ORDER BY o.depth, o.imp, o.sib),
           -- (A LibreChat message whose children were not read, every one of
           -- a flat export, lists nothing to disagree with.)
           (SELECT count(*)
              FROM (SELECT c.parent_key, c.key FROM n c JOIN n p ON p.key = c.parent_key
                     WHERE p_source <> 'librechat' OR p.children IS NOT NULL) a
              FULL JOIN listed b ON b.parent_key = a.parent_key AND b.child = a.key
             WHERE a.key IS NULL OR b.child IS NULL)
      INTO m_idx, m_imp, m_key, m_role, m_reason, m_parts, m_at, m_src, m_node, v_mismatches
      FROM o;

    -- Each message's id, parents first (they come first): the keyed digest
    -- of its parent's id, its node key, role, parts and source time (none
    -- where it would be the import's). Keyed, as every digest of content
    -- is: erasure keeps the id, which must not answer a guess of the parts.
    v_pos := array_fill(0, ARRAY[coalesce(cardinality(v_keys), 0)]);
    m_id := '{}';
    m_parent := '{}';
    FOR i IN 1 .. coalesce(cardinality(m_idx), 0) LOOP
        v_pos[m_idx[i]] := i;
        v_p := CASE WHEN m_imp[i] = 0 THEN 0 ELSE v_pos[m_imp[i]] END;
        m_parent[i] := CASE WHEN v_p > 0 THEN m_id[v_p] END;
        m_id[i] := left(convo_private.keyed_digest(encode(sha256(convert_to(jsonb_build_array(
                       coalesce(m_parent[i], v_conv), m_key[i], m_role[i], m_parts[i], extract(epoch FROM m_src[i]))::text,
                       'UTF8')), 'hex')), 32)::uuid;
    END LOOP;

    -- Caps, before anything is written: CV010 naming the first node over one.
    SELECT x.key, x.why INTO v_bad
      FROM (SELECT x.key, CASE
                   WHEN octet_length(x.parts::text) > convo.max_message_bytes()
                       THEN format('a message of %s bytes (max_message_bytes %s)', octet_length(x.parts::text), convo.max_message_bytes())
                   WHEN octet_length(x.node::text) > convo.max_message_bytes()
                       THEN format('a source node of %s bytes (max_message_bytes %s)', octet_length(x.node::text), convo.max_message_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE octet_length(p.part::text) > convo.max_part_bytes())
                       THEN format('a part over max_part_bytes %s', convo.max_part_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE p.part ->> 'type' = 'tool_use'
                                   AND octet_length((p.part -> 'input')::text) > convo.max_tool_input_bytes())
                       THEN format('a tool input over max_tool_input_bytes %s', convo.max_tool_input_bytes())
                   WHEN length(x.key) > convo_private.max_id_length() AND x.parts -> 0 ->> 'type' = 'tool_use'
                       THEN format('a tool call id (the node key) of %s characters (at most %s)', length(x.key), convo_private.max_id_length())
                   END AS why
              FROM unnest(m_key, m_parts, m_node) AS x (key, parts, node)) x
     WHERE x.why IS NOT NULL
     ORDER BY x.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the import is over a size cap at node %', v_bad.key
            USING ERRCODE = 'CV010', DETAIL = format('%s, node %s: %s', p_where, v_bad.key, v_bad.why);
    END IF;

    -- The head: the nearest imported node at or above p_current, else the latest leaf.
    IF p_current IS NOT NULL THEN
        v_i := array_position(v_keys, p_current);
        v_head_idx := CASE WHEN v_imported[v_i] THEN v_i ELSE nullif(v_imp[v_i], 0) END;
    END IF;
    IF v_head_idx IS NOT NULL THEN
        v_head := m_id[v_pos[v_head_idx]];
    ELSE
        SELECT x.id INTO v_head
          FROM unnest(m_id, m_idx, m_at, m_key) AS x (id, idx, at, key)
         WHERE NOT EXISTS (SELECT 1 FROM unnest(m_imp) AS c (imp) WHERE c.imp = x.idx)
         ORDER BY x.at DESC, x.key COLLATE "C" DESC
         LIMIT 1;
        v_fallback := CASE WHEN v_head IS NOT NULL THEN 'latest_leaf' END;
    END IF;

    IF NOT v_merge THEN
        v_metadata := jsonb_build_object('import', p_metadata || jsonb_build_object(
            'dropped_nodes', v_dropped, 'children_mismatches', v_mismatches, 'head_fallback', v_fallback));
        IF octet_length(v_metadata::text) > convo.max_metadata_bytes() THEN
            RAISE EXCEPTION 'the import''s conversation metadata is larger than % bytes', convo.max_metadata_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('%s: metadata of %s bytes', p_where, octet_length(v_metadata::text));
        END IF;

        v_title := left(convo_private.nonempty_text(p_metadata -> 'title'), convo_private.max_title_length());
        v_created := least(coalesce(p_conv_time, (SELECT min(a) FROM unnest(m_at) AS a), v_now), v_now);
        INSERT INTO convo.conversations (id, owner_id, metadata, created_at, title, last_activity_at)
        VALUES (v_conv, p_owner_id, v_metadata, v_created, v_title, v_created)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            -- An import of this source that another session committed
            -- meanwhile (merged into, under the same id), or an earlier
            -- import of it that erasure has left without its source key.
            PERFORM FROM convo.imports i
             WHERE i.owner_id = p_owner_id AND i.format = p_source AND i.source_key = p_source_key AND i.import_id IS NULL
               AND i.conversation_id = v_conv;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'conversation % was imported before from this source and erased', v_conv
                    USING ERRCODE = 'CV009', DETAIL = p_where,
                          HINT = 'An erased import is not imported again under its id; import it under another owner.';
            END IF;
            v_merge := true;
        END IF;
    END IF;

    IF v_merge THEN
        -- A merge: only the messages not there yet (a node that is there has
        -- its ancestors there too, so what is new hangs under what is there
        -- or under new messages before it), a later sibling's branch reason
        -- by the first one stored (not the import's first, which may be a
        -- later stored one); the head moves to the import's when the
        -- conversation has none or the import's is later (time, then id).
        v_old_head := convo_private.lock_conversation(v_conv);
        -- A conversation imported before messages had these ids (version 40
        -- and earlier: md5 of the conversation and the node key) would take
        -- the whole tree again beside its own: refused, as it was then.
        IF EXISTS (SELECT 1 FROM convo.import_origins o
                    WHERE o.conversation_id = v_conv AND o.message_id = md5(v_conv::text || ':' || o.node_key)::uuid) THEN
            RAISE EXCEPTION 'source % was imported before for owner % with other content', p_source_key, p_owner_id
                USING ERRCODE = 'CV009', DETAIL = format('%s; imported before as conversation %s', p_where, v_conv),
                      HINT = 'It was imported before merges (version 40 and earlier), so it is not merged; '
                             'import it under another owner to keep both.';
        END IF;
        SELECT array_agg(s.id IS NULL ORDER BY x.i),
               array_agg(CASE WHEN s.id IS NOT NULL OR f.role IS NULL THEN x.reason
                              WHEN x.role = 'user' AND f.role = 'user' THEN 'user_edit'
                              WHEN x.role = 'assistant' AND f.role = 'assistant' THEN 'regenerate'
                              ELSE 'branch' END ORDER BY x.i)
          INTO m_new, m_reason
          FROM unnest(m_id, m_parent, m_role, m_reason) WITH ORDINALITY AS x (id, parent_id, role, reason, i)
          LEFT JOIN convo.messages s ON s.conversation_id = v_conv AND s.id = x.id
          -- (One probe of messages_sibling_key each: an OR of the parent's
          -- two cases read every message of the conversation per message.)
          LEFT JOIN LATERAL (SELECT f.role FROM convo.messages f
                              WHERE s.id IS NULL AND x.parent_id IS NULL
                                AND f.conversation_id = v_conv AND f.parent_id IS NULL AND f.sibling_index = 1
                             UNION ALL
                             SELECT f.role FROM convo.messages f
                              WHERE s.id IS NULL
                                AND f.conversation_id = v_conv AND f.parent_id = x.parent_id AND f.sibling_index = 1) f ON true;
        v_move := v_head IS NOT NULL AND (v_old_head IS NULL OR coalesce((
            -- (m_at is by message position, as m_id.)
            SELECT (coalesce(h.created_at, m_at[array_position(m_id, v_head)]), v_head)
                   > (o.created_at, o.id)
              FROM convo.messages o LEFT JOIN convo.messages h ON h.conversation_id = v_conv AND h.id = v_head
             WHERE o.conversation_id = v_conv AND o.id = v_old_head), false));
        IF NOT v_move AND NOT coalesce(true = ANY (m_new), false) THEN
            RETURN v_conv;
        END IF;
        SELECT array_agg(x.id ORDER BY x.i), array_agg(x.parent_id ORDER BY x.i), array_agg(x.role ORDER BY x.i),
               array_agg(x.parts ORDER BY x.i), array_agg(x.reason ORDER BY x.i), array_agg(x.at ORDER BY x.i),
               array_agg(x.key ORDER BY x.i), array_agg(x.node ORDER BY x.i)
          INTO m_id, m_parent, m_role, m_parts, m_reason, m_at, m_key, m_node
          FROM unnest(m_id, m_parent, m_role, m_parts, m_reason, m_at, m_key, m_node, m_new)
               WITH ORDINALITY AS x (id, parent_id, role, parts, reason, at, key, node, new, i)
         WHERE x.new;
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
        VALUES (v_conv, v_import, p_owner_id, p_source, p_source_key, p_digest);
        INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
        SELECT v_conv, x.id, p_source, x.key, x.node
          FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
        PERFORM convo_private.write_messages(v_conv, v_old_head, convo_private.new_messages(m_id, m_parent, m_role, m_parts,
                                                                                            m_reason, m_at),
                                             p_import_id => v_import, p_head => CASE WHEN v_move THEN v_head END,
                                             p_head_reason => 'import');
        RETURN v_conv;
    END IF;

    INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
    VALUES (v_conv, v_import, p_owner_id, p_source, p_source_key, p_digest);
    -- The export's title is the conversation's, logged as the import's.
    IF v_title IS NOT NULL THEN
        PERFORM convo_private.log_change(v_conv, 'title', NULL, v_title, convo_private.caller(), v_import);
    END IF;

    -- Origins (their foreign key is deferred), then the messages through
    -- write_messages, parents before children, siblings in order, with
    -- their original times and the import's record (so no ledger row),
    -- and the head's one move, 'import'.
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT v_conv, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    PERFORM convo_private.write_messages(v_conv, NULL, convo_private.new_messages(m_id, m_parent, m_role, m_parts, m_reason,
                                                                                  m_at),
                                         p_import_id => v_import, p_head => v_head, p_head_reason => 'import');
    RETURN v_conv;
END;
$$;
