-- Table changes for set_live_updates / live_updates (to go below the marked
-- line of the next migration's up file; the down file drops the column).
-- up:
ALTER TABLE convo_private.settings ADD COLUMN live_updates boolean DEFAULT true NOT NULL;
COMMENT ON TABLE convo_private.settings IS 'The settings a DBA sets (one row, none until set): the retention period of deleted conversations, the text search configuration, whether live-update notifications are sent, who set them last and when.';
-- down:
-- ALTER TABLE convo_private.settings DROP COLUMN live_updates;
-- COMMENT ON TABLE convo_private.settings IS 'The settings a DBA sets (one row, none until set): the retention period of deleted conversations, the text search configuration, who set them last and when.';
