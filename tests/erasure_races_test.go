package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Erasures racing what an application writes: erase_owner waits for every
// open transaction that made something of the owner's, and nothing of the
// owner's is made while it runs; and a transaction whose snapshot is older
// than an erasure cannot write to the erased conversation.

// loginName is the role a pool logs in as.
func loginName(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return queryRow[string](t, pool, `SELECT session_user::text`)
}

// waitUntilLoginBlocked polls, by count, until some backend of login waits on a
// lock; done reports a goroutine that ended meanwhile, which fails the test
// saying what it was, since it should still be waiting.
func waitUntilLoginBlocked(t testing.TB, db *pgxpool.Pool, login, what string, done <-chan error) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		select {
		case err := <-done:
			t.Fatalf("%s did not wait: it ended with %v", what, err)
		default:
		}
		if queryRow[int64](t, db, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'`, login) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s was not seen waiting on a lock after 3000 looks", what)
}

// TestEraseOwnerWaitsForWhatTheOwnerMakes: a conversation and a receipt
// made in a transaction still open when erase_owner starts are erased with
// the rest once it commits, not left with their content while the erasure
// says they are erased.
func TestEraseOwnerWaitsForWhatTheOwnerMakes(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	marker := "MARK" + strings.ReplaceAll(newID(), "-", "")
	createConversation(t, db, "alice", "")

	ctx := context.Background()
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var conv string
	if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT convo.create_conversation('alice', $1)::text`, "Your PIN is "+marker).Scan(&conv); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT * FROM convo.begin_receipt('alice', 'follow-0001', 'file_followup', $1::jsonb)`,
		`{"pin": "`+marker+`"}`); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := admin.Exec(ctx, `SELECT * FROM convo.erase_owner('alice', 'asked by the customer')`)
		done <- err
	}()
	waitUntilLoginBlocked(t, db, loginName(t, admin), "erase_owner", done)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("erase_owner: %v", err)
	}
	requireSlice(t, "places still holding the content", markerPlaces(t, db, marker), nil)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.erasures WHERE conversation_id = $1`, conv)
	requireEqual(t, "failing checks", failingChecks(t, db), "")
}

// TestEraseOwnerErasesWhatItLocked: while erase_owner waits for a
// conversation an application is writing to, no new conversation of the
// owner's is made (it waits for the erasure); made afterwards, it keeps its
// content and no erasure names it. The old way listed the conversations
// again after the wait and erased one it had never locked, while another
// transaction wrote to it unseen.
func TestEraseOwnerErasesWhatItLocked(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	marker := "MARK" + strings.ReplaceAll(newID(), "-", "")
	first := createConversation(t, db, "alice", "")

	ctx := context.Background()
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', $2)`, first, textParts("first "+marker)); err != nil {
		t.Fatal(err)
	}
	erased := make(chan error, 1)
	go func() {
		_, err := admin.Exec(ctx, `SELECT * FROM convo.erase_owner('alice', 'asked by the customer')`)
		erased <- err
	}()
	waitUntilLoginBlocked(t, db, loginName(t, admin), "erase_owner", erased)

	var second string
	made := make(chan error, 1)
	go func() {
		made <- inOwnerTx(app, "alice", func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT convo.create_conversation('alice', $1)::text`, "second "+marker).Scan(&second)
		})
	}()
	waitUntilLoginBlocked(t, db, loginName(t, app), "a conversation made while erase_owner runs", made)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-erased; err != nil {
		t.Fatalf("erase_owner: %v", err)
	}
	if err := <-made; err != nil {
		t.Fatalf("create_conversation after the erasure: %v", err)
	}
	requireSlice(t, "places still holding the content", markerPlaces(t, db, marker), []string{"messages.parts"})
	requireCount(t, db, 1, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1 AND parts::text LIKE '%second%'`, second)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.erasures WHERE conversation_id = $1`, second)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.erasures WHERE conversation_id = $1`, first)
	requireEqual(t, "failing checks", failingChecks(t, db), "")
}

// TestSnapshotOlderThanAnErasureCannotWrite: a REPEATABLE READ transaction
// whose snapshot is older than an erasure of its conversation (one with no
// title or metadata, whose row erasure had nothing to change) cannot append
// to it afterwards (40001) and writes nothing: counted without the erasure,
// its key epoch would meet the erased call's keys.
func TestSnapshotOlderThanAnErasureCannotWrite(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustExec(t, db, `SELECT convo.register_tool('check_pin', true, $1::jsonb, p_idempotency_scope => 'conversation_args')`, pinSchema)
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{ID: "call_pin", Name: "check_pin", Input: map[string]any{"pin": "4821"}}))
	app := loginAs(t, db, "convo_app")

	ctx := context.Background()
	tx, err := app.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'owner-1'`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM convo.path($1)`, conv).Scan(&n); err != nil {
		t.Fatal(err)
	}
	mustExec(t, loginAs(t, db, "convo_admin"), `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`, conv)
	before := fingerprint(t, db)
	_, err = tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
		effToolUses(effCall{ID: "call_guess", Name: "check_pin", Input: map[string]any{"pin": "4821"}}))
	requireSQLState(t, err, "40001")
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatal(err)
	}
	requireFingerprint(t, db, "the refused append", before)
	requireEqual(t, "failing checks", failingChecks(t, db), "")
}
