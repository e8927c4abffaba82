package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestMigration0044OnADatabaseThatHasData: going up to 0044 on a database
// at 0043 that holds an erased conversation marks it erased (the sidebar no
// longer lists it) and puts every message with text in the search index;
// going down again is refused while a deletion is recorded, changing
// nothing.
func TestMigration0044OnADatabaseThatHasData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	if err := m.Goto(ctx, 43); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
	erased := queryRow[string](t, pool, `SELECT convo.create_conversation('owner-m', 'a prompt')::text`)
	mustExec(t, pool, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "forget my walrus"}]')`, erased)
	mustExec(t, pool, `SELECT * FROM convo.erase_conversation($1, 'asked')`, erased)
	kept := queryRow[string](t, pool, `SELECT convo.create_conversation('owner-m', 'a prompt')::text`)
	mustExec(t, pool, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "my walrus is blue"}]')`, kept)

	if err := m.Goto(ctx, 44); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "erased_at of the erased conversation", queryRow[bool](t, pool, `
		SELECT c.erased_at = (SELECT min(e.erased_at) FROM convo.erasures e WHERE e.conversation_id = c.id)
		  FROM convo.conversations c WHERE c.id = $1`, erased), true)
	requireEqual(t, "the sidebar", queryRow[string](t, pool,
		`SELECT string_agg(conversation_id::text, ',') FROM convo.conversations('owner-m')`), kept)
	// The index: the kept conversation's two messages with text; the erased
	// one's none (its texts are redacted).
	requireCount(t, pool, 2, `SELECT count(*) FROM convo_private.message_search`)
	requireEqual(t, "a search for walrus", queryRow[string](t, pool,
		`SELECT string_agg(conversation_id::text, ',') FROM convo.search_conversations('owner-m', 'walrus')`), kept)

	mustExec(t, pool, `SELECT convo.delete_conversation($1)`, kept)
	err := m.Goto(ctx, 43)
	if err == nil || !strings.Contains(err.Error(), "version 43 cannot hold a deletion") {
		t.Fatalf("going below 0044 with a deletion recorded: want the refusal, got %v", err)
	}
	requireEqual(t, "the version after the refusal", queryRow[int64](t, pool,
		`SELECT count(*) FROM convo.conversations WHERE deleted_at IS NOT NULL`), int64(1))
}
