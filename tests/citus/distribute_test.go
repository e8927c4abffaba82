package citus

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// pathRow is what the tests read of convo.path.
type pathRow struct {
	Role         string
	Text         string
	SiblingIndex int
	SiblingCount int
}

// readPath reads conv's path as owner through app.
func readPath(t *testing.T, app *pgxpool.Pool, owner, conv string) ([]pathRow, error) {
	t.Helper()
	var rows []pathRow
	err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		r, err := tx.Query(context.Background(),
			`SELECT role, parts -> 0 ->> 'text', sibling_index, sibling_count FROM convo.path($1) ORDER BY depth`, conv)
		if err != nil {
			return err
		}
		rows, err = pgx.CollectRows(r, pgx.RowToStructByPos[pathRow])
		return err
	})
	return rows, err
}

// treeStory writes the tree's seed story as app, for owner: a conversation
// with a system prompt, an exchange, an edit of the first question, a
// generation streamed and completed on the edit, a title. It returns the
// conversation and the first question.
func treeStory(t *testing.T, app *pgxpool.Pool, owner string) (conv, first string) {
	t.Helper()
	conv = pgtest.NewID()
	err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		one[string](t, tx, `SELECT convo.create_conversation($1, 'be brief', '{}', $2)`, owner, conv)
		first = one[string](t, tx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("hi"))
		one[string](t, tx, `SELECT convo.append_message($1, 'assistant', $2)`, conv, textParts("hello"))
		edited := one[string](t, tx, `SELECT convo.edit_and_resend($1, $2, $3)`, conv, first, textParts("hey"))
		gen := one[string](t, tx, `SELECT convo.begin_generation($1, $2, 'model-a')`, conv, edited)
		one[string](t, tx, `SELECT convo.complete_generation($1, $2, $3)`, conv, gen, textParts("hey there"))
		_, err := tx.Exec(context.Background(), `SELECT convo.set_title($1, 'greeting')`, conv)
		return err
	})
	if err != nil {
		t.Fatalf("the tree story: %v", err)
	}
	return conv, first
}

// requireTreeStory checks what treeStory wrote, as its owner, and that
// another owner is told it does not exist.
func requireTreeStory(t *testing.T, app *pgxpool.Pool, owner, conv, first string) {
	t.Helper()
	got, err := readPath(t, app, owner, conv)
	if err != nil {
		t.Fatalf("path: %v", err)
	}
	want := []pathRow{{"system", "be brief", 1, 1}, {"user", "hey", 2, 2}, {"assistant", "hey there", 1, 1}}
	if g, w := mustJSON(got), mustJSON(want); g != w {
		t.Fatalf("path:\n got %s\nwant %s", g, w)
	}
	err = inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		reasons := one[[]string](t, tx, `SELECT array_agg(reason ORDER BY seq) FROM convo.head_history($1)`, conv)
		if g := mustJSON(reasons); g != `["create","append","append","user_edit","append"]` {
			t.Errorf("head_history reasons: %s", g)
		}
		n := one[int](t, tx, `SELECT count(*)::int FROM convo.alternatives($1, $2)`, conv, first)
		if n != 2 {
			t.Errorf("alternatives of the first question: %d, want 2", n)
		}
		if n := one[int](t, tx, `SELECT jsonb_array_length(convo.export_conversation($1) -> 'messages')`, conv); n != 5 {
			t.Errorf("export_conversation holds %d messages, want 5", n)
		}
		body := one[string](t, tx, `SELECT convo.request_messages($1)::text`, conv)
		if body != `[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hey"}, {"role": "assistant", "content": "hey there"}]` {
			t.Errorf("request_messages: %s", body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = readPath(t, app, "someone-else", conv)
	pgtest.RequireSQLState(t, err, "CV002")
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestDistributeFreshDatabase installs pgconvo on a new coordinator with
// two workers, distributes it, and runs the tree's story through the API
// as an application login; the owner role stays NOLOGIN on every node.
func TestDistributeFreshDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	var refused *migrator.DistributeError
	if _, err := migrator.Distribute(context.Background(), n.db); !errors.As(err, &refused) ||
		!strings.Contains(err.Error(), "run `migrate up` first") {
		t.Fatalf("distribute before up: %v", err)
	}
	migrateUp(t, n)
	login := pgtest.LoginAs(t, n.pool, "convo_admin")
	loginDB, err := sql.Open("pgx", login.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer loginDB.Close()
	if _, err := migrator.Distribute(context.Background(), loginDB); err == nil ||
		!strings.Contains(err.Error(), "GRANT ") {
		t.Fatalf("distribute as a DBA's login, which may not migrate: %v, want a refusal naming the grant it needs", err)
	}
	if d, err := migrator.ReadDistribution(context.Background(), n.db); err != nil || d.Distributed {
		t.Fatalf("after the refusals: %+v, %v", d, err)
	}
	distribute(t, n)
	d, err := migrator.ReadDistribution(context.Background(), n.db)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Distributed || d.Workers != 2 {
		t.Fatalf("distribution after distribute: %+v", d)
	}
	// Run again, it changes nothing and still succeeds, and drops what an
	// earlier version of it installed and this one no longer does.
	retired := []string{`convo_node.register_tool_on_node(uuid, text, boolean, jsonb, text, interval, text, text)`,
		`convo_node.node_keys(regclass)`}
	for _, f := range retired {
		if _, err := n.db.Exec(`CREATE FUNCTION ` + f + ` RETURNS int LANGUAGE sql AS 'SELECT 1'`); err != nil {
			t.Fatal(err)
		}
	}
	distribute(t, n)
	for _, f := range retired {
		var left *string
		if err := n.db.QueryRow(`SELECT to_regprocedure($1)::text`, f).Scan(&left); err != nil || left != nil {
			t.Fatalf("%s after distribute ran again: %v, %v; want it dropped", f, left, err)
		}
	}
	for _, u := range append([]string{n.url}, c.workerURLs(n)...) {
		conn, err := pgx.Connect(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		var login, exists bool
		err = conn.QueryRow(context.Background(),
			`SELECT coalesce(bool_or(rolcanlogin), false), count(*) = 1 FROM pg_roles WHERE rolname = 'convo_owner'`).
			Scan(&login, &exists)
		conn.Close(context.Background())
		if err != nil || login || !exists {
			t.Fatalf("convo_owner on %s: exists %v, can log in %v, %v", u, exists, login, err)
		}
	}
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	conv, first := treeStory(t, app, "alice")
	requireTreeStory(t, app, "alice", conv, first)
}

// TestDistributeMigratedDatabase distributes a database that was migrated
// and written before: what was there reads the same after, and the story
// goes on.
func TestDistributeMigratedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	conv, first := treeStory(t, app, "alice")
	requireTreeStory(t, app, "alice", conv, first)
	distribute(t, n)
	requireTreeStory(t, app, "alice", conv, first)
	err := inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
		one[string](t, tx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("and then?"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := readPath(t, app, "alice", conv)
	if err != nil || len(rows) != 4 || rows[3].Text != "and then?" {
		t.Fatalf("path after an append on the distributed database: %+v, %v", rows, err)
	}
}
