-- messages_fill_tree: a message's depth, sibling_index and branch_id are
-- computed from its parent on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER messages_fill_tree
    BEFORE INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.messages_fill_tree();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_fill_tree;
