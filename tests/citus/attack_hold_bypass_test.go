package citus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestAttackNewConversationSkipsOwnerHold: create_conversation's router
// holds the owner on the owner's node (hold_for_new) before it makes the
// conversation on its own node, so that an erase_owner running meanwhile
// waits for the transaction and then erases what it made. The
// conversation's step, which convo_app may call itself, once made a
// conversation without any hold, which erase_owner did not wait for and left
// unerased; it now takes the hold's token, a keyed digest of the owner and
// the distributed transaction, and refuses without it (CV011).
func TestAttackNewConversationSkipsOwnerHold(t *testing.T) {
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")

	for _, way := range []struct {
		name   string
		create string
	}{
		{"the router (control)", `SELECT convo.create_conversation($2, 'secret prompt', '{}', $1::uuid)`},
	} {
		t.Run(way.name, func(t *testing.T) {
			owner := "erased_" + pgtest.NewID()[:8]
			treeStory(t, app, owner) // something to erase already
			conv := pgtest.NewID()
			erasedAt := eraseWhileCreating(t, app, admin, owner, conv, way.create)
			var created time.Time
			var prompt string
			err := inOwnerTx(t, n.pool, owner, func(tx pgx.Tx) error {
				return tx.QueryRow(context.Background(), `
					SELECT c.created_at, m.parts -> 0 ->> 'text'
					  FROM convo.conversations c JOIN convo.messages m ON m.conversation_id = c.id
					 WHERE c.id = $1 AND m.role = 'system'`, conv).Scan(&created, &prompt)
			})
			if err != nil {
				t.Fatal(err)
			}
			if created.Before(erasedAt) && prompt == "secret prompt" {
				t.Errorf("conversation %s, created at %s, keeps its content after erase_owner recorded owner %s "+
					"as erased at %s: the erasure did not wait for its maker", conv, created, owner, erasedAt)
			}
		})
	}
	// The conversation's step called without the owner's: refused, with a
	// forged token and with one its own hold gave in an earlier transaction.
	t.Run("new_conversation_held_delegated without the owner held", func(t *testing.T) {
		owner := "unheld_" + pgtest.NewID()[:8]
		ctx := context.Background()
		var earlier string
		err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT convo_node.hold_for_new_delegated($1, ARRAY['create conversations'])`, owner).Scan(&earlier)
		})
		if err != nil || earlier == "" {
			t.Fatalf("a hold's token: %q, %v", earlier, err)
		}
		for _, token := range []string{"forged", earlier} {
			conv := pgtest.NewID()
			err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, fmt.Sprintf(`SELECT convo_node.new_conversation_held_delegated('%s'::uuid, ARRAY[$1::text],
					ARRAY['secret prompt'], ARRAY['{}'::jsonb], ARRAY[true], ARRAY[$2::text])`, conv), owner, token)
				return err
			})
			pgtest.RequireSQLState(t, err, "CV011")
			if n := pgtest.QueryRow[int](t, n.pool, `SELECT count(*)::int FROM convo.conversations WHERE id = $1`, conv); n != 0 {
				t.Fatalf("the refused conversation was written")
			}
		}
	})
}

// eraseWhileCreating makes conversation conv of owner by create (with $1
// the id, $2 the owner; %L in it is replaced by the id as a literal, the
// delegated function's constant key) in a transaction of app's that stays
// open while admin's erase_owner of the owner starts, then commits it,
// waits for the erasure and returns the time its record names.
func eraseWhileCreating(t *testing.T, app, admin *pgxpool.Pool, owner, conv, create string) time.Time {
	t.Helper()
	ctx := context.Background()
	sql := strings.Replace(create, "%L", "'"+conv+"'::uuid", 1)
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = '`+owner+`'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, conv, owner); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := admin.Exec(ctx, `SELECT * FROM convo.erase_owner($1, 'the owner asked')`, owner)
		done <- err
	}()
	var eraseErr error
	finished := false
	select {
	case eraseErr = <-done:
		finished = true
		t.Logf("erase_owner finished while the maker's transaction was still open")
	case <-time.After(2 * time.Second): // waiting for the maker, as it should
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !finished {
		select {
		case eraseErr = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("erase_owner did not finish")
		}
	}
	if eraseErr != nil {
		t.Fatalf("erase_owner: %v", eraseErr)
	}
	return pgtest.QueryRow[time.Time](t, admin, `SELECT max(erased_at) FROM convo.owner_erasures WHERE owner_id = $1`, owner)
}
