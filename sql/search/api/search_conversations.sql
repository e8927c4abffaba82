-- search_conversations: an owner's messages that match p_query (a search
-- box's words, read by websearch_to_tsquery: "quoted phrases", or, -word)
-- under the search configuration (search_config), best first: each
-- message's conversation and title, its role and time, a snippet of its
-- text with the matches between ** and **, whether it is on the live path
-- (else on a branch edited or regenerated away), and its rank (ts_rank).
-- Keyset-paged: pass the last row's rank, conversation_id and message_id as
-- p_before_rank, p_before_conversation_id and p_before_message_id for the
-- next page; ties by conversation and message id, descending. Text parts
-- only; deleted and erased conversations are not searched (erasure removes
-- their entries from the index). One GIN scan of the index
-- (message_search_document_idx) for the words and the owner's lexeme
-- (search_owner) together, so it reads the owner's matches only; the rank
-- of each, then the page's snippets. The owner this session may see (CV011
-- for another, as conversations()); a query with no word to find (only
-- -words) CV011, one of only stop words returns nothing; p_limit 1 to 100;
-- the cursor all three or none.
CREATE OR REPLACE FUNCTION convo.search_conversations(
    p_owner_id                text,
    p_query                   text,
    p_limit                   int DEFAULT 20,
    p_before_rank             real DEFAULT NULL,
    p_before_conversation_id  uuid DEFAULT NULL,
    p_before_message_id       uuid DEFAULT NULL)
RETURNS TABLE (conversation_id uuid, message_id uuid, title text, role text, created_at timestamptz,
               snippet text, on_live_path boolean, rank real)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_config regconfig := convo_private.search_config_in_use();
    v_words  tsquery;
BEGIN
    PERFORM convo_private.check_sees_owner(p_owner_id);
    IF p_query IS NULL OR btrim(p_query) = '' THEN
        RAISE EXCEPTION 'p_query is required: the words to search for'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_query) > 1000 THEN
        RAISE EXCEPTION 'p_query is longer than 1000 characters'
            USING ERRCODE = 'CV010', DETAIL = format('owner %s, %s characters', p_owner_id, length(p_query));
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100 THEN
        RAISE EXCEPTION 'p_limit must be between 1 and 100, not %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF num_nulls(p_before_rank, p_before_conversation_id, p_before_message_id) NOT IN (0, 3) THEN
        RAISE EXCEPTION 'p_before_rank, p_before_conversation_id and p_before_message_id go together: the last row of the previous page'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    v_words := websearch_to_tsquery(v_config, p_query);
    IF numnode(v_words) = 0 THEN
        RETURN;  -- only stop words: nothing to find
    END IF;
    IF querytree(v_words) = 'T' THEN
        RAISE EXCEPTION 'the query has no word to find, only words to leave out'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, query %s', p_owner_id, v_words::text);
    END IF;
    RETURN QUERY
    WITH hits AS MATERIALIZED (
        SELECT s.conversation_id, s.message_id, ts_rank(s.document, v_words) AS rank
          FROM convo_private.message_search s
         WHERE s.document @@ (v_words && quote_literal(convo_private.search_owner(p_owner_id))::tsquery)),
    page AS (
        SELECT h.conversation_id, h.message_id, h.rank, c.title
          FROM hits h
          JOIN convo.conversations c
            ON c.id = h.conversation_id AND c.owner_id = p_owner_id AND c.deleted_at IS NULL AND c.erased_at IS NULL
         WHERE p_before_rank IS NULL
            OR (h.rank, h.conversation_id, h.message_id) < (p_before_rank, p_before_conversation_id, p_before_message_id)
         ORDER BY h.rank DESC, h.conversation_id DESC, h.message_id DESC
         LIMIT p_limit)
    SELECT p.conversation_id, p.message_id, p.title, m.role, m.created_at,
           ts_headline(v_config, convo_private.search_text(m.parts), v_words,
                       'StartSel=**, StopSel=**, MaxWords=30, MinWords=10, MaxFragments=2, FragmentDelimiter=" … "'),
           EXISTS (SELECT 1 FROM convo.live_path l
                    WHERE l.conversation_id = m.conversation_id AND l.branch_id = m.branch_id
                      AND m.depth BETWEEN l.min_depth AND l.max_depth),
           p.rank
      FROM page p
      JOIN convo.messages m ON m.conversation_id = p.conversation_id AND m.id = p.message_id
     ORDER BY p.rank DESC, p.conversation_id DESC, p.message_id DESC;
END;
$$;

COMMENT ON FUNCTION convo.search_conversations(text, text, integer, real, uuid, uuid) IS
    'Full-text search of an owner''s messages, best first, keyset-paged: conversation, message, snippet, on the live path or not.';
