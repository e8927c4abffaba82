package citus

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// schemaChanges serializes the tests' migrations and distributions: they
// change catalogs the cluster's databases share (the roles), and Citus
// passes each change on to the workers, where two at once collide
// ("tuple concurrently updated"). A deployment runs them once.
var schemaChanges sync.Mutex

// migrateUp applies every migration to n, as the superuser.
func migrateUp(t *testing.T, n *node) {
	t.Helper()
	schemaChanges.Lock()
	defer schemaChanges.Unlock()
	m, err := migrator.Open(n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Up(context.Background()); err != nil {
		t.Fatalf("migrate up on the coordinator: %v", err)
	}
}

// distribute runs `migrate distribute` on n and requires that it keeps
// every foreign key.
func distribute(t *testing.T, n *node) {
	t.Helper()
	schemaChanges.Lock()
	defer schemaChanges.Unlock()
	unkept, err := migrator.Distribute(context.Background(), n.db)
	if err != nil {
		t.Fatalf("distribute: %v", err)
	}
	if len(unkept) > 0 {
		t.Fatalf("distribute did not keep the foreign keys %s", strings.Join(unkept, ", "))
	}
}

// inOwnerTx runs fn in a transaction with the owner set, as the
// application does it (SET LOCAL).
func inOwnerTx(t *testing.T, db *pgxpool.Pool, owner string, fn func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = '`+strings.ReplaceAll(owner, "'", "''")+`'`); err != nil {
			return err
		}
		return fn(tx)
	})
}

// one reads one value in tx.
func one[T any](t *testing.T, tx pgx.Tx, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := tx.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// textParts is a text part array.
var textParts = pgtest.TextParts
