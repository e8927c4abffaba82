package citus

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// TestImportsAndSelfCheckRefuseOnDistributedDatabase: what does not run on
// a distributed database yet (the imports, self_check, the sweep of deleted
// conversations, search and its configuration) says so with
// feature_not_supported (0A000), to the roles that may call it, and
// changes nothing; `migrate verify` passes the reason on.
func TestImportsAndSelfCheckRefuseOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	conv, _ := treeStory(t, app, "alice")
	before := rowCounts(t, n.pool)

	chatgpt := `{"id": "c1", "title": "t", "mapping": {"a": {"id": "a", "parent": null, "children": [],
		"message": {"author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}}}},
		"current_node": "a"}`
	for _, call := range []struct {
		role string
		sql  string
		args []any
	}{
		{"convo_app", `SELECT convo.import_chatgpt('alice', $1::jsonb)`, []any{chatgpt}},
		{"convo_app", `SELECT convo.import_openwebui('alice', '{"id": "w1", "chat": {}}')`, nil},
		{"convo_app", `SELECT convo.import_librechat('alice', '{"conversationId": "l1"}')`, nil},
		{"convo_app", `SELECT * FROM convo.import_history('chatgpt', 'alice', $1::jsonb)`,
			[]any{"[" + chatgpt + "]"}},
		{"convo_admin", `SELECT convo.import_conversation('alice', '{}')`, nil},
		{"convo_admin", `SELECT * FROM convo.self_check()`, nil},
		{"convo_admin", `SELECT convo.erase_due()`, nil},
		{"convo_app", `SELECT * FROM convo.search_conversations('alice', 'hello')`, nil},
		{"convo_admin", `SELECT convo.set_search_config('english')`, nil},
	} {
		login := map[string]*pgxpool.Pool{"convo_app": app, "convo_admin": admin}[call.role]
		_, err := login.Exec(ctx, call.sql, call.args...)
		if !errIs(err, "0A000") || !strings.Contains(err.Error(), "does not run on a distributed database") {
			t.Errorf("%s as %s: %v, want 0A000 saying it does not run on a distributed database",
				call.sql, call.role, err)
		}
	}
	if after := rowCounts(t, n.pool); !maps.Equal(before, after) {
		t.Errorf("the refused calls wrote: before %v, after %v", before, after)
	}
	if _, err := migrator.Verify(ctx, n.db); err == nil || !strings.Contains(err.Error(), "does not run on a distributed database") {
		t.Errorf("migrate verify on a distributed database: %v, want the refusal", err)
	}

	// Deleting a chat runs on its worker: hidden from the sidebar and its
	// owner's reads, and back after convo_admin's restore.
	listed := func() int {
		var n int
		if err := inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
			n = one[int](t, tx, `SELECT count(*)::int FROM convo.conversations('alice') WHERE conversation_id = $1`, conv)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.delete_conversation($1)`, conv)
		return err
	}); err != nil {
		t.Fatalf("delete_conversation on a distributed database: %v", err)
	}
	if got := listed(); got != 0 {
		t.Errorf("the deleted conversation is listed %d times, want 0", got)
	}
	err := inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT * FROM convo.path($1)`, conv)
		return err
	})
	if !errIs(err, "CV002") {
		t.Errorf("path of the deleted conversation: %v, want CV002", err)
	}
	if _, err := admin.Exec(ctx, `SELECT convo.restore_deleted_conversation($1)`, conv); err != nil {
		t.Fatalf("restore_deleted_conversation on a distributed database: %v", err)
	}
	if got := listed(); got != 1 {
		t.Errorf("the restored conversation is listed %d times, want 1", got)
	}
}
