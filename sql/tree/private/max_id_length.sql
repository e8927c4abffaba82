-- max_id_length: the cap on an id a caller names as text (an owner id, a
-- tool call id), in characters: 255, so that every index on them holds
-- (PostgreSQL's btree refuses entries over about 2.7 kB) and a longer id
-- is the contract's CV011 or CV010, never a raw 54000.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo_private.max_id_length()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 255;
