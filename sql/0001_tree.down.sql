-- 0001_tree down: drops what 0001_tree.up.sql created, in reverse order.

DROP TRIGGER messages_fill_tree ON convo.messages;
DROP TRIGGER messages_append_only ON convo.messages;
DROP TRIGGER message_parts_check ON convo.message_parts;
DROP TRIGGER message_parts_append_only ON convo.message_parts;
DROP TRIGGER conversations_no_delete ON convo.conversations;
DROP TRIGGER conversations_head_log ON convo.conversations;
DROP TRIGGER conversations_guard ON convo.conversations;
DROP TRIGGER conversation_head_log_append_only ON convo.conversation_head_log;

DROP FUNCTION convo.regenerate;
DROP FUNCTION convo.refuse_change;
DROP FUNCTION convo.path_from;
DROP FUNCTION convo.path_at;
DROP FUNCTION convo.path;
DROP FUNCTION convo.move_head_to;
DROP FUNCTION convo.move_head;
DROP FUNCTION convo.messages_fill_tree;
DROP FUNCTION convo.message_ref;
DROP FUNCTION convo.message_parts_of;
DROP FUNCTION convo.message_parts_check;
DROP FUNCTION convo.max_tool_input_bytes;
DROP FUNCTION convo.max_part_bytes;
DROP FUNCTION convo.max_metadata_bytes;
DROP FUNCTION convo.max_message_bytes;
DROP FUNCTION convo.log_head_move;
DROP FUNCTION convo.lock_conversation;
DROP FUNCTION convo.is_retry;
DROP FUNCTION convo.insert_message;
DROP FUNCTION convo.head_history;
DROP FUNCTION convo.head_at;
DROP FUNCTION convo.edit_and_resend;
DROP FUNCTION convo.create_conversation;
DROP FUNCTION convo.conversations_guard;
DROP FUNCTION convo.conversation_ref;
DROP FUNCTION convo.check_parts;
DROP FUNCTION convo.check_expected_head;
DROP FUNCTION convo.append_message;
DROP FUNCTION convo.alternatives;
DROP FUNCTION convo.add_sibling;

DROP TABLE convo.conversation_head_log;
DROP TABLE convo.message_parts;
ALTER TABLE convo.conversations DROP CONSTRAINT conversations_head_fkey;
DROP TABLE convo.messages;
DROP TABLE convo.conversations;
DROP SCHEMA convo;
