-- search_owner: the lexeme that marks an owner's documents in the search
-- index (convo_private.message_search): 'owner ' and the md5 of the owner
-- id, which no text yields (to_tsvector never makes a lexeme with a space).
-- A search asks for it with its words, so the index answers from the
-- owner's documents alone, however many other owners' match the words.
CREATE OR REPLACE FUNCTION convo_private.search_owner(p_owner_id text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 'owner ' || md5(p_owner_id);
