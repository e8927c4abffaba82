package citus

import (
	"context"
	"testing"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestAttackOwnerClearedOnCoordinatorOnly: a transaction that named an
// owner with SET LOCAL and then clears it (set_config to the empty string,
// or a plain SET to the empty string) has no owner on the coordinator, and
// on one server it would see nothing (CV002). Citus never sends set_config
// or a plain SET to the workers, so while the routers' pass_owner re-sent
// the owner only when it was not empty, the worker kept the earlier SET
// LOCAL and the ownerless session still read and wrote the earlier owner's
// conversation; pass_owner now always sends it. RESET, which Citus does
// send, is the control.
func TestAttackOwnerClearedOnCoordinatorOnly(t *testing.T) {
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	conv, first := treeStory(t, app, "bob")

	for _, clear := range []struct{ name, sql string }{
		{"set_config to empty", `SELECT set_config('convo.owner_id', '', true)`},
		{"plain SET to empty", `SET convo.owner_id = ''`},
		{"RESET (control)", `RESET convo.owner_id`},
	} {
		t.Run(clear.name, func(t *testing.T) {
			conn, err := app.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck
			if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'bob'`); err != nil {
				t.Fatal(err)
			}
			// bob's own call: the worker's connection now carries bob.
			if n := one[int](t, tx, `SELECT count(*)::int FROM convo.path($1)`, conv); n != 3 {
				t.Fatalf("bob's path: %d rows", n)
			}
			if _, err := tx.Exec(ctx, clear.sql); err != nil {
				t.Fatal(err)
			}
			if got := one[string](t, tx, `SELECT coalesce(current_setting('convo.owner_id', true), '')`); got != "" {
				t.Fatalf("the coordinator's owner after %s: %q, want none", clear.sql, got)
			}
			// With no owner set, nothing is visible and nothing writable.
			if _, err := tx.Exec(ctx, `SAVEPOINT read`); err != nil {
				t.Fatal(err)
			}
			var rows int
			err = tx.QueryRow(ctx, `SELECT count(*)::int FROM convo.path($1)`, conv).Scan(&rows)
			if pgtest.SQLState(err) != "CV002" {
				t.Errorf("path with no owner on the coordinator: %d rows, %v; want CV002 (the worker still acts for bob)", rows, err)
			}
			if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT read`); err != nil {
				t.Fatal(err)
			}
			var id string
			err = tx.QueryRow(ctx, `SELECT convo.edit_and_resend($1, $2, '[{"type": "text", "text": "written by nobody"}]')`,
				conv, first).Scan(&id)
			if pgtest.SQLState(err) != "CV002" {
				t.Errorf("edit_and_resend with no owner on the coordinator: %q, %v; want CV002 (written as bob)", id, err)
			}
		})
	}
	// Everything above rolled back.
	requireTreeStory(t, app, "bob", conv, first)
}
