-- search_document: a message's entry in the search index: its text
-- (search_text) under the search configuration, and its owner's lexeme
-- (search_owner).
CREATE OR REPLACE FUNCTION convo_private.search_document(p_parts jsonb, p_config regconfig, p_owner_id text)
RETURNS tsvector
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN to_tsvector(p_config, convo_private.search_text(p_parts))
       || array_to_tsvector(ARRAY[convo_private.search_owner(p_owner_id)]);
