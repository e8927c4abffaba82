-- max_librechat_nesting: how deep a recursive LibreChat export may nest its
-- replies (each reply sits in its parent's children): 256 levels.
-- librechat_flatten copies a nested value once per level above it (jsonb
-- hands out sub-values only as copies), so this cap keeps an import within
-- 256 times its input; a longer conversation comes as LibreChat's flat
-- export (recursive off), which has no such cost and no cap.
CREATE OR REPLACE FUNCTION convo_private.max_librechat_nesting()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 256;
