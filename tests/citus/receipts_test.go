package citus

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// receiptStory is the receipts' seed story on a distributed database, as
// app for owner: a receipt first, its arguments checked against the tool's
// frozen schema, then applied; a repeat of the request returns the first
// receipt; another owner may not touch it, and neither may a session that
// names no owner. purchase is a registered tool.
func receiptStory(t *testing.T, app *pgxpool.Pool, owner, purchase string) {
	t.Helper()
	ctx := context.Background()
	key := "order-" + pgtest.NewID()
	var receipt string
	err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		var created bool
		if err := tx.QueryRow(ctx, `SELECT receipt_id::text, created FROM convo.begin_receipt($1, $2, $3, '{"path": "/orders"}')`,
			owner, key, purchase).Scan(&receipt, &created); err != nil || !created {
			t.Fatalf("begin_receipt: created %v, %v", created, err)
		}
		status := one[string](t, tx, `SELECT status FROM convo.fill_receipt($1, '{"amount_minor": 500, "currency": "EUR"}')`, receipt)
		if status != "pending" {
			t.Errorf("fill_receipt with valid arguments: %s", status)
		}
		_, err := tx.Exec(ctx, `SELECT convo.apply_receipt($1, 'order-1')`, receipt)
		return err
	})
	if err != nil {
		t.Fatalf("the receipt story: %v", err)
	}
	err = inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		var again string
		var created bool
		err := tx.QueryRow(ctx, `SELECT receipt_id::text, created FROM convo.begin_receipt($1, $2, $3, '{"path": "/orders"}')`,
			owner, key, purchase).Scan(&again, &created)
		if err == nil && (again != receipt || created) {
			t.Errorf("the repeat: %s (created %v), want %s", again, created, receipt)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = inOwnerTx(t, app, "someone-else", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.fail_receipt($1, 500, 'boom')`, receipt)
		return err
	})
	pgtest.RequireSQLState(t, err, "CV002")
	_, err = app.Exec(ctx, `SELECT convo.fail_receipt($1, 500, 'boom')`, receipt)
	pgtest.RequireSQLState(t, err, "CV002")
	err = inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.begin_receipt($1, $2, $3)`, "someone-else", "order-"+pgtest.NewID(), purchase)
		return err
	})
	pgtest.RequireSQLState(t, err, "CV011")
}

// TestReceiptsOnDistributedDatabase runs the receipts' story on a
// distributed database, the tool registered before distributing.
func TestReceiptsOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	pgtest.EffRegisterPurchase(t, n.pool, "purchase", "tool_call", "20 seconds")
	distribute(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	receiptStory(t, app, "alice", "purchase")
}

// TestExpireReceiptsOnDistributedDatabase: the receipts' sweep, as a DBA's
// login on a distributed database, fails every pending receipt past its
// deadline, whichever worker holds its owner, and only those.
func TestExpireReceiptsOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	pgtest.EffRegisterPurchase(t, n.pool, "slow", "tool_call", "1 hour")
	pgtest.EffRegisterPurchase(t, n.pool, "quick", "tool_call", "1 millisecond")
	distribute(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	ctx := context.Background()
	owners := []string{"ann", "ben", "cat", "dan", "eve", "fay"}
	for _, owner := range owners {
		err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
			for _, tool := range []string{"slow", "quick"} {
				if _, err := tx.Exec(ctx, `SELECT convo.begin_receipt($1, $2, $3)`, owner, "order-"+pgtest.NewID(), tool); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	pgtest.MustExec(t, n.pool, `SELECT pg_sleep(0.01)`)
	if got := pgtest.QueryRow[int](t, admin, `SELECT convo.expire_receipts()`); got != len(owners) {
		t.Fatalf("expire_receipts: %d, want %d", got, len(owners))
	}
	states := pgtest.QueryRow[string](t, n.pool, `
		SELECT string_agg(tool_name || ':' || status || ':' || coalesce(http_status::text, '-'), ',' ORDER BY tool_name)
		  FROM (SELECT DISTINCT tool_name, status, http_status FROM convo.tool_receipts) r`)
	if states != "quick:failed:504,slow:pending:-" {
		t.Fatalf("the receipts after the sweep: %s", states)
	}
	if got := pgtest.QueryRow[int](t, admin, `SELECT convo.expire_receipts()`); got != 0 {
		t.Fatalf("a second sweep: %d", got)
	}
	_, err := admin.Exec(ctx, `SELECT convo.expire_receipts(NULL)`)
	pgtest.RequireSQLState(t, err, "CV011")
	_, err = app.Exec(ctx, `SELECT convo.expire_receipts()`)
	pgtest.RequireSQLState(t, err, "42501")
}
