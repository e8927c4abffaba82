package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// What erase_owner's hold on an owner lets others do, and what runs inside
// the API that a session may be told of.

// TestOwnerHoldIsNoAdvisoryLock: a login with no rights at all holds the
// advisory locks an owner's hold was once taken under, shared and
// exclusive; the owner's application still creates a conversation and a
// receipt, and the owner is still erased (each within a lock_timeout that
// fails the test, 55P03, instead of waiting). The hold's row is the owner
// role's alone: that login cannot lock it.
func TestOwnerHoldIsNoAdvisoryLock(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
	createConversation(t, db, "victim", "")
	nobody := loginAs(t, db)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	ctx := context.Background()
	for _, lock := range []string{"pg_advisory_lock", "pg_advisory_lock_shared"} {
		t.Run(lock, func(t *testing.T) {
			conn, err := nobody.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, fmt.Sprintf(`SELECT %s(hashtext('pgconvo owner'), hashtext('victim'))`, lock)); err != nil {
				t.Fatal(err)
			}
			defer conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
			err = inOwnerTx(app, "victim", func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `SELECT convo.create_conversation('victim', '')`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `SELECT * FROM convo.begin_receipt('victim', $1, 'file_followup', '{}')`, "key-"+lock)
				return err
			})
			if err != nil {
				t.Fatalf("the owner's work while another login holds the advisory lock: %v", err)
			}
			err = inOwnerTx(admin, "", func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `SELECT * FROM convo.erase_owner('victim', 'asked')`)
				return err
			})
			if err != nil {
				t.Fatalf("erase_owner while another login holds the advisory lock: %v", err)
			}
		})
	}
	_, err := nobody.Exec(ctx, `SELECT 1 FROM convo_private.owner_holds WHERE owner_id = 'victim' FOR SHARE`)
	requireSQLState(t, err, "42501")
}

// TestEraseOwnerRunsAtReadCommitted: in a REPEATABLE READ or SERIALIZABLE
// transaction, whose snapshot is taken before erase_owner waits for the
// owner's open transactions, erase_owner is refused (0A000) and writes
// nothing, rather than record the owner as erased and leave what those
// transactions made.
func TestEraseOwnerRunsAtReadCommitted(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	createConversation(t, db, "alice", "Your PIN is 4821.")
	admin := loginAs(t, db, "convo_admin")
	ctx := context.Background()
	for _, level := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		before := fingerprint(t, db)
		tx, err := admin.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, `SELECT * FROM convo.erase_owner('alice', 'asked')`)
		_ = tx.Rollback(ctx)
		requireSQLState(t, err, "0A000")
		requireFingerprint(t, db, string(level)+" erase_owner", before)
	}
}

// TestNoLogOfWhatRunsInsideReachesTheClient: where a DBA preloads
// auto_explain with nested statements logged, a convo_app session that asks
// for LOG messages is sent the plan of its own statement only: nothing of
// the statements the API and the views run inside, which read every
// owner's rows (their plans' row counts would tell them).
func TestNoLogOfWhatRunsInsideReachesTheClient(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	buildTenant(t, db, "alice")
	buildTenant(t, db, "bob")
	ctx := context.Background()
	dbname := queryRow[string](t, db, `SELECT current_database()`)
	for _, s := range []string{
		`ALTER DATABASE %s SET session_preload_libraries = 'auto_explain'`,
		`ALTER DATABASE %s SET auto_explain.log_min_duration = 0`,
		`ALTER DATABASE %s SET auto_explain.log_nested_statements = on`,
		`ALTER DATABASE %s SET auto_explain.log_analyze = on`,
	} {
		mustExec(t, db, fmt.Sprintf(s, pgx.Identifier{dbname}.Sanitize()))
	}
	app := loginAs(t, db, "convo_app")
	cfg := app.Config().ConnConfig.Copy()
	var messages []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { messages = append(messages, n.Severity+": "+n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET client_min_messages = log`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SELECT count(*) FROM convo.orphaned_applied_effects`,
		`SELECT count(*) FROM convo.stale_pending_effects`, `SELECT count(*) FROM convo.conversations('alice')`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if len(messages) == 0 {
		t.Fatal("auto_explain sent no plan at all: the test did not test")
	}
	for _, m := range messages {
		if strings.Contains(m, "Index") || strings.Contains(m, "Seq Scan") || strings.Contains(m, "tool_effects") {
			t.Fatalf("a plan of what runs inside reached the client: %s", m)
		}
	}
}
