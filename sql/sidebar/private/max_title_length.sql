-- max_title_length: the cap on a conversation's title, in characters: 1,000,
-- so that a sidebar row stays small; a longer set_title is CV010, and an
-- imported title is cut to it (the export's own stays in the metadata).
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo_private.max_title_length()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 1000;
