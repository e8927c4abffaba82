package tests

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Where the package once answered differently from its contract: one test
// each.

// TestPathAtShowsSiblingsAsTheyWere: "what the customer saw at 14:03"
// includes the "< 1/1 >" of that instant: siblings created later (a
// regenerate, an edit) do not count.
func TestPathAtShowsSiblingsAsTheyWere(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
	then := dbNow(t, db)
	time.Sleep(2 * time.Millisecond)
	regenerateMsg(t, db, conv, a1, textParts("Hello there."))
	editMsg(t, db, conv, u1, textParts("Hey."))
	moveHead(t, db, conv, a1)

	counts := func(rows []pathRow) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Role+" "+strconv.Itoa(int(r.SiblingIndex))+"/"+strconv.Itoa(int(r.SiblingCount)))
		}
		return out
	}
	requireSlice(t, "path at the earlier instant", counts(readPathAt(t, db, conv, then)),
		[]string{"system 1/1", "user 1/1", "assistant 1/1"})
	requireSlice(t, "path now", counts(readPath(t, db, conv)), []string{"system 1/1", "user 1/2", "assistant 1/2"})
}

// TestCreateConversationRetries: the exact repeat returns the first id
// even after messages were appended under its system prompt (or, without
// one, after a system message was appended as the first message); the same
// id with another owner, metadata (compared as text: 500 is not 500.0) or
// system prompt, none versus some included, is CV009 and writes nothing.
func TestCreateConversationRetries(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	with, without := newID(), newID()
	mustExec(t, db, `SELECT convo.create_conversation('owner-1', 'Be brief.', '{"n": 500}', $1)`, with)
	mustExec(t, db, `SELECT convo.create_conversation('owner-1', NULL, '{}', $1)`, without)
	appendMsg(t, db, with, "user", textParts("Hello."))
	appendMsg(t, db, without, "system", textParts("A system message appended first."))
	appendMsg(t, db, without, "user", textParts("Hello."))

	requireEqual(t, "exact repeat with a prompt", queryRow[string](t, db,
		`SELECT convo.create_conversation('owner-1', 'Be brief.', '{"n": 500}', $1)::text`, with), with)
	requireEqual(t, "exact repeat without one", queryRow[string](t, db,
		`SELECT convo.create_conversation('owner-1', NULL, '{}', $1)::text`, without), without)
	before := fingerprint(t, db)
	for _, c := range []struct{ name, sql, id string }{
		{"another owner", `SELECT convo.create_conversation('owner-2', 'Be brief.', '{"n": 500}', $1)`, with},
		{"other metadata", `SELECT convo.create_conversation('owner-1', 'Be brief.', '{"n": 501}', $1)`, with},
		{"500.0 for 500", `SELECT convo.create_conversation('owner-1', 'Be brief.', '{"n": 500.0}', $1)`, with},
		{"another prompt", `SELECT convo.create_conversation('owner-1', 'Be verbose.', '{"n": 500}', $1)`, with},
		{"none for some", `SELECT convo.create_conversation('owner-1', NULL, '{"n": 500}', $1)`, with},
		{"some for none", `SELECT convo.create_conversation('owner-1', 'A system message appended first.', '{}', $1)`, without},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.Exec(context.Background(), c.sql, c.id)
			requireSQLState(t, err, "CV009")
		})
	}
	requireFingerprint(t, db, "the refused retries", before)
}

// TestRetriesCompareJSONText: a retry is the same request only if its JSON
// text is the same (the contract's canonical arguments): 500.0 where the
// first call said 500 is CV009 for a message and a generation, and CV006
// for a second fill of a receipt.
func TestRetriesCompareJSONText(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	user := appendMsg(t, db, conv, "user", textParts("Buy 500."))
	msg := newID()
	mustExec(t, db, `SELECT convo.append_message($1, 'assistant', $2, p_message_id => $3)`, conv,
		`[{"type": "tool_use", "id": "toolu_1", "name": "buy", "input": {"amount_minor": 500}}]`, msg)
	gen := newID()
	mustExec(t, db, `SELECT convo.begin_generation($1, $2, 'm', '{"temperature": 1}', NULL, $3)`, conv, user, gen)
	receipt := beginReceipt(t, db, "owner-1", "follow-0001", "file_followup", `{}`).ID
	fillReceipt(t, db, receipt, `{"amount": 500}`, `{}`)

	requireEqual(t, "the exact retry", queryRow[string](t, db, `SELECT convo.append_message($1, 'assistant', $2, p_message_id => $3)::text`,
		conv, `[{"type": "tool_use", "id": "toolu_1", "name": "buy", "input": {"amount_minor": 500}}]`, msg), msg)
	before := fingerprint(t, db)
	ctx := context.Background()
	_, err := db.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2, p_message_id => $3)`, conv,
		`[{"type": "tool_use", "id": "toolu_1", "name": "buy", "input": {"amount_minor": 500.0}}]`, msg)
	requireSQLState(t, err, "CV009")
	_, err = db.Exec(ctx, `SELECT convo.begin_generation($1, $2, 'm', '{"temperature": 1.0}', NULL, $3)`, conv, user, gen)
	requireSQLState(t, err, "CV009")
	_, err = db.Exec(ctx, `SELECT * FROM convo.fill_receipt($1, '{"amount": 500.0}', '{}')`, receipt)
	requireSQLState(t, err, "CV006")
	requireFingerprint(t, db, "the refused retries", before)
	if got := fillReceipt(t, db, receipt, `{"amount": 500}`, `{}`); got.Status != "pending" {
		t.Fatalf("the exact repeat of the fill: %+v", got)
	}
}

// TestExactRepeatAfterALaterTransition: settling applied again, exactly,
// after the effect was compensated is a no-op: no error, nothing written.
func TestExactRepeatAfterALaterTransition(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	appendMsg(t, db, conv, "user", textParts("Buy 500."))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_1", "buy", 500)))
	effect := effForCall(t, db, conv, "toolu_1").EffectID
	effSettle(t, db, conv, effect, "ch_1")
	effCompensate(t, db, conv, effect, "re_1")
	before := fingerprint(t, db)
	effSettle(t, db, conv, effect, "ch_1")
	effCompensate(t, db, conv, effect, "re_1")
	requireFingerprint(t, db, "the exact repeats", before)
	_, err := db.Exec(context.Background(), `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_2', p_http_status => 200)`, conv, effect)
	requireSQLState(t, err, "CV006")
}

// TestIDCaps: an owner id or tool call id over 255 characters is the
// contract's error (CV011, CV010), never a raw 54000 from an index, and
// nothing is written; 255 characters are fine.
func TestIDCaps(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	appendMsg(t, db, conv, "user", textParts("Hello."))
	long, fits := strings.Repeat("x", 4000), strings.Repeat("y", 255)
	before := fingerprint(t, db)
	ctx := context.Background()
	_, err := db.Exec(ctx, `SELECT convo.create_conversation($1)`, long)
	requireSQLState(t, err, "CV011")
	_, err = db.Exec(ctx, `SELECT * FROM convo.begin_receipt($1, 'follow-0001', 'file_followup')`, long)
	requireSQLState(t, err, "CV011")
	_, err = db.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
		`[{"type": "tool_use", "id": "`+long+`", "name": "lookup", "input": {}}]`)
	requireSQLState(t, err, "CV010")
	requireFingerprint(t, db, "the refused ids", before)
	mustExec(t, db, `SELECT convo.create_conversation($1)`, fits)
	mustExec(t, db, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
		`[{"type": "tool_use", "id": "`+fits+`", "name": "lookup", "input": {}}]`)
}

// TestRegisterToolRaceInRepeatableRead: two REPEATABLE READ transactions
// registering the same tool at once: the first gets its version, the
// second a retryable 40001, never a 23505; retried, it gets the next.
func TestRegisterToolRaceInRepeatableRead(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	a, b := dedicatedConn(t, db), dedicatedConn(t, db)
	txA, err := a.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	txB, err := b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range []pgx.Tx{txA, txB} { // take both snapshots now
		if _, err := tx.Exec(ctx, `SELECT count(*) FROM convo.tools`); err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := txA.QueryRow(ctx, `SELECT convo.register_tool('lookup', false, '{"type": "object"}')`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("first registration: %d, %v", v, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := txB.Exec(ctx, `SELECT convo.register_tool('lookup', false, '{"type": "object", "title": "other"}')`)
		done <- err
	}()
	waitForLock(t, db, b.PgConn().PID()) // B waits for A's lock on the name
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	requireSQLState(t, <-done, "40001")
	txB.Rollback(ctx)
	requireEqual(t, "the retry's version", queryRow[int](t, db,
		`SELECT convo.register_tool('lookup', false, '{"type": "object", "title": "other"}')`), 2)
}

// TestErrorDetailsNameTheIDs: the errors that named nothing now name the
// ids involved, and a refused message's own id is never named, since it
// was not stored.
func TestErrorDetailsNameTheIDs(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	root := headOf(t, db, conv)
	refused := newID()
	ctx := context.Background()
	for _, c := range []struct {
		name, sql, code string
		args            []any
		names           []string
	}{
		{"empty parts", `SELECT convo.append_message($1, 'user', '[]', p_message_id => $2)`, "CV008", []any{conv, refused}, []string{conv, root}},
		{"unknown role", `SELECT convo.append_message($1, 'robot', $3, p_message_id => $2)`, "CV011",
			[]any{conv, refused, textParts("beep")}, []string{conv, root}},
		{"a bad part", `SELECT convo.append_message($1, 'user', '[{"type": "text"}]', p_message_id => $2)`, "CV008",
			[]any{conv, refused}, []string{conv, root}},
		{"invalid head-move reason", `SELECT convo.move_head($1, $2, 'Not A Reason')`, "CV011", []any{conv, root}, []string{conv, root}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.Exec(ctx, c.sql, c.args...)
			requireSQLState(t, err, c.code)
			e := pgError(t, err)
			for _, id := range c.names {
				if !strings.Contains(e.Detail, id) {
					t.Errorf("DETAIL %q does not name %s", e.Detail, id)
				}
			}
			if strings.Contains(e.Message+e.Detail, refused) {
				t.Errorf("the error names the refused message's id %s as if it existed: %s / %s", refused, e.Message, e.Detail)
			}
		})
	}
}

// TestEveryCVErrorHasADetail reads every function of the package and
// requires each RAISE of a CV SQLSTATE to carry a DETAIL, so that a new
// error cannot come without one.
func TestEveryCVErrorHasADetail(t *testing.T) {
	t.Parallel()
	raise := regexp.MustCompile(`(?s)RAISE EXCEPTION.*?;`)
	var files []string
	for _, dir := range []string{"../sql/*/api", "../sql/*/private"} {
		paths, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, paths...)
	}
	if len(files) < 50 {
		t.Fatalf("read %d files: wrong directory?", len(files))
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range raise.FindAllIndex(body, -1) {
			st := string(body[m[0]:m[1]])
			if strings.Contains(st, "ERRCODE = 'CV") && !strings.Contains(st, "DETAIL") {
				line := strings.Count(string(body[:m[0]]), "\n") + 1
				t.Errorf("%s:%d: a CV error without DETAIL: %s", f, line, strings.Join(strings.Fields(st), " "))
			}
		}
	}
}
