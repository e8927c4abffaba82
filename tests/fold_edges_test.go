package tests

// Edges of write_messages' typed entry, settle_receipt and conversations()'
// one keyset query (migration 0043), written by an outside attacker's
// review of that change and kept as regression tests.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Claim 3: no API role calls write_messages, new_messages, or uses the
// type convo_private.new_message.
func TestWriteEntryClosedToTheAPIRoles(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "alice", "Hello.")
	head := headOf(t, db, conv)
	before := fingerprint(t, db)
	grantee := createGrantedRole(t, db)
	stmts := []string{
		fmt.Sprintf(`SELECT convo_private.write_messages('%[1]s', '%[2]s',
			p_messages => ARRAY[(gen_random_uuid(), '%[2]s', 'user', '[{"type":"text","text":"x"}]', NULL, NULL)::convo_private.new_message],
			p_head => NULL)`, conv, head),
		fmt.Sprintf(`SELECT convo_private.write_messages('%s', NULL)`, conv),
		`SELECT NULL::convo_private.new_message`,
		`SELECT '{}'::convo_private.new_message[]`,
		`SELECT convo_private.new_messages(NULL, NULL, NULL, NULL, NULL, NULL)`,
	}
	for _, role := range []string{"convo_app", "convo_reader", "convo_admin", ""} {
		var login *pgxpool.Pool
		if role != "" {
			login = loginAs(t, db, role)
		} else {
			login = loginAs(t, db)
			mustExec(t, db, `GRANT `+pgx.Identifier{grantee}.Sanitize()+` TO `+
				queryRow[string](t, db, `SELECT rolname::text FROM pg_roles WHERE rolname LIKE 'login_%' ORDER BY oid DESC LIMIT 1`))
			role = "granted"
		}
		for _, s := range stmts {
			err := asOwner(login, "alice", s)
			if err == nil {
				t.Errorf("%s: %s succeeded", role, s)
			} else if c := sqlState(err); c != "42501" {
				t.Errorf("%s: %s: %v (want 42501)", role, s, err)
			}
		}
	}
	requireFingerprint(t, db, "the attempts on write_messages", before)
}

// Claim 4: apply_receipt and fail_receipt through settle_receipt answer as
// before, for convo_app sessions.
func TestSettleReceiptAnswersAsBefore(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	app := loginAs(t, db, "convo_app")
	maxRef := queryRow[int](t, db, `SELECT convo.max_ref_length()`)
	bobs := beginReceipt(t, db, "bob", "follow-bob-0001", "file_followup", followupRequest)
	fillReceipt(t, db, bobs.ID, followupArgs, followupRoute)
	pending := beginReceipt(t, db, "alice", "follow-unfilled", "file_followup", followupRequest)
	filled := beginReceipt(t, db, "alice", "follow-filled", "file_followup", followupRequest)
	fillReceipt(t, db, filled.ID, followupArgs, followupRoute)
	invalid := beginReceipt(t, db, "alice", "follow-invalid", "file_followup", followupRequest)
	inv := fillReceipt(t, db, invalid.ID, `{"bogus": 1}`, `{}`)
	const (
		apply = `SELECT convo.apply_receipt($1, $2, $3)`
		fail  = `SELECT convo.fail_receipt($1, $2, $3)`
	)
	run := func(name, sql string, code string, args ...any) {
		t.Helper()
		before := fingerprint(t, db)
		err := asOwner(app, "alice", sql, args...)
		if got := sqlState(err); got != code {
			t.Errorf("%s: %v (code %q, want %q)", name, err, got, code)
		}
		if code != "" || strings.HasPrefix(name, "repeat") {
			requireFingerprint(t, db, name, before)
		}
	}
	run("apply bob's", apply, "CV002", bobs.ID, "r", 201)
	run("fail bob's", fail, "CV002", bobs.ID, 500, "e")
	run("apply nil uuid", apply, "CV002", "00000000-0000-0000-0000-000000000000", "r", 201)
	run("fail max uuid", fail, "CV002", "ffffffff-ffff-ffff-ffff-ffffffffffff", 500, "e")
	for _, s := range []int{199, 300, 400, 0, -1} {
		run(fmt.Sprintf("apply status %d", s), apply, "CV011", filled.ID, "r", s)
	}
	for _, s := range []int{200, 299, 399, 600, 0} {
		run(fmt.Sprintf("fail status %d", s), fail, "CV011", filled.ID, s, "e")
	}
	run("apply NULL status", apply, "CV011", filled.ID, "r", nil)
	run("fail NULL code", fail, "CV011", filled.ID, 500, nil)
	run("apply too long", apply, "CV010", filled.ID, strings.Repeat("r", maxRef+1), 201)
	run("fail too long", fail, "CV010", filled.ID, 500, strings.Repeat("e", maxRef+1))
	run("apply unfilled", apply, "CV006", pending.ID, "r", 201)
	run(fmt.Sprintf("apply invalid (%+v)", inv), apply, "CV006", invalid.ID, "r", 201)
	run("fail invalid again differently", fail, "CV006", invalid.ID, 500, "other")
	run("repeat of fill's failure", fail, "", invalid.ID, inv.HTTPStatus, inv.ErrorCode)
	run("apply filled", apply, "", filled.ID, "followup:1", 201)
	run("repeat apply", apply, "", filled.ID, "followup:1", 201)
	run("apply again, other ref", apply, "CV006", filled.ID, "followup:2", 201)
	run("apply again, other status", apply, "CV006", filled.ID, "followup:1", 200)
	run("fail applied", fail, "CV006", filled.ID, 500, "followup:1")
	run("fail unfilled", fail, "", pending.ID, 503, "upstream")
	run("repeat fail", fail, "", pending.ID, 503, "upstream")
	run("fail again other", fail, "CV006", pending.ID, 502, "upstream")
	run("apply failed", apply, "CV006", pending.ID, "upstream", 201)
	got := readReceipt(t, db, filled.ID)
	if got.Status != "applied" || got.ResultRef != "followup:1" || got.HTTPStatus != 201 || got.ErrorCode != "" {
		t.Errorf("applied receipt: %+v", got)
	}
	got = readReceipt(t, db, pending.ID)
	if got.Status != "failed" || got.ErrorCode != "upstream" || got.HTTPStatus != 503 || got.ResultRef != "" {
		t.Errorf("failed receipt: %+v", got)
	}
	if r := readReceipt(t, db, bobs.ID); r.Status != "pending" {
		t.Errorf("bob's receipt: %+v", r)
	}
}

// setActivity sets last_activity_at directly, as a superuser with the
// guard off (the way tests/sidebar_test.go makes ties).
func setActivity(t *testing.T, db *pgxpool.Pool, at string, ids []string) {
	t.Helper()
	mustExec(t, db, `BEGIN;
		ALTER TABLE convo.conversations DISABLE TRIGGER conversations_10_guard;
		UPDATE convo.conversations SET last_activity_at = '`+at+`' WHERE id = ANY ('{`+strings.Join(ids, ",")+`}'::uuid[]);
		ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_10_guard;
		COMMIT`)
}

func pageThroughSidebar(t *testing.T, app *pgxpool.Pool, owner string, limit int) []string {
	t.Helper()
	var all []string
	var before *time.Time
	beforeID := ""
	seen := map[string]bool{}
	for page := 0; page < 100; page++ {
		rows := listSidebar(t, app, owner, limit, before, false, beforeID)
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if seen[r.ID] {
				t.Errorf("limit %d: %s repeated", limit, r.ID)
			}
			seen[r.ID] = true
			all = append(all, r.ID)
		}
		last := rows[len(rows)-1]
		lt := last.LastActivity
		before, beforeID = &lt, last.ID
	}
	return all
}

// Claim 5: pages never skip or repeat, with ties, the nil and max uuids as
// ids; p_before alone is strictly older; nothing of another owner shows.
func TestSidebarKeysetEdges(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	ids := []string{"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
		"80000000-0000-0000-0000-000000000000", "7fffffff-ffff-ffff-ffff-ffffffffffff"}
	for _, id := range ids {
		if err := asOwner(app, "alice", `SELECT convo.create_conversation('alice', p_conversation_id => $1)`, id); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	var tied []string
	for i := 0; i < 6; i++ {
		tied = append(tied, createConversation(t, db, "alice", ""))
	}
	for i := 0; i < 6; i++ {
		createConversation(t, db, "bob", "")
	}
	bobs := queryRowsAs[string](t, db, `SELECT id::text FROM convo.conversations WHERE owner_id = 'bob'`)
	setActivity(t, db, "2020-01-01 00:00:00+00", append(append([]string{}, ids...), append(tied, bobs...)...))
	older := createConversation(t, db, "alice", "")
	setActivity(t, db, "2019-12-31 23:59:59.999999+00", []string{older})
	newest := createConversation(t, db, "alice", "")
	want := queryRowsAs[string](t, db, `SELECT id::text FROM convo.conversations WHERE owner_id = 'alice' ORDER BY last_activity_at DESC, id DESC`)
	if want[0] != newest || want[len(want)-1] != older {
		t.Fatalf("setup order: %v", want)
	}
	for _, limit := range []int{1, 2, 3, 5, 1000} {
		requireSlice(t, fmt.Sprintf("pages of %d", limit), pageThroughSidebar(t, app, "alice", limit), want)
	}
	// p_before alone: strictly older.
	tie := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := listSidebar(t, app, "alice", 1000, &tie, false, "")
	if len(rows) != 1 || rows[0].ID != older {
		t.Errorf("p_before alone at the tie: %+v, want only %s", rows, older)
	}
	// p_before with the nil uuid: the tie is before nothing of that time.
	rows = listSidebar(t, app, "alice", 1000, &tie, false, "00000000-0000-0000-0000-000000000000")
	if len(rows) != 1 || rows[0].ID != older {
		t.Errorf("p_before with the nil uuid: %+v", rows)
	}
	// p_before with the max uuid: every row of the tie but the max one.
	rows = listSidebar(t, app, "alice", 1000, &tie, false, "ffffffff-ffff-ffff-ffff-ffffffffffff")
	if len(rows) != len(want)-2 {
		t.Errorf("p_before with the max uuid: %d rows, want %d", len(rows), len(want)-2)
	}
	// Edges of p_before: infinity is every row, -infinity none.
	for _, c := range []struct {
		before string
		n      int
	}{{"infinity", len(want)}, {"-infinity", 0}} {
		got := queryAsOwner(t, app, "alice", `SELECT conversation_id::text FROM convo.conversations('alice', 1000, $1::timestamptz)`, c.before)
		if len(got) != c.n {
			t.Errorf("p_before %s: %d rows, want %d", c.before, len(got), c.n)
		}
	}
	// Another owner's: CV011, and none of bob's rows for alice.
	requireSQLState(t, asOwner(app, "alice", `SELECT * FROM convo.conversations('bob')`), "CV011")
	requireSQLState(t, asOwner(app, "alice", `SELECT * FROM convo.conversations('alice', 10, NULL, false, $1)`, ids[1]), "CV011")
	reader := loginAs(t, db, "convo_reader")
	requireEqual(t, "bob's for the reader", len(pageThroughSidebar(t, reader, "bob", 4)), 6)
}
