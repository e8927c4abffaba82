-- The verbatim source node of every imported message (import_chatgpt,
-- import_openwebui), beside the message and off the hot path: path() never
-- reads it. Conversation-scoped keys, so it distributes with the
-- conversation. The foreign key to the message is deferred: the import
-- writes a message's origin before the message, so that the tree and ledger
-- triggers can tell an imported message (convo_private.is_imported) from
-- any other, which no setting can fake.
CREATE TABLE convo.import_origins (
    conversation_id uuid  NOT NULL REFERENCES convo.conversations (id),
    message_id      uuid  NOT NULL,
    source          text  NOT NULL CHECK (source IN ('chatgpt', 'openwebui')),
    node_key        text  NOT NULL,
    node            jsonb NOT NULL,
    PRIMARY KEY (conversation_id, message_id),
    CONSTRAINT import_origins_message_fkey FOREIGN KEY (conversation_id, message_id)
        REFERENCES convo.messages (conversation_id, id) DEFERRABLE INITIALLY DEFERRED
);
COMMENT ON TABLE convo.import_origins IS
    'The source node of each imported message, verbatim (erasure empties it); append-only.';
ALTER TABLE convo.import_origins ENABLE ROW LEVEL SECURITY;
CREATE POLICY import_origins_reader_reads_all ON convo.import_origins FOR SELECT TO convo_reader USING (true);
