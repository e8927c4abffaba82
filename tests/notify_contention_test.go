package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The database's switch for live updates (set_live_updates, convo_admin's):
// PostgreSQL makes every notifying commit of the cluster take turns on one
// lock (async.c's PreCommit_Notify), so a database nobody listens to turns
// them off for every session at once; the head log and the event log stay
// the record a listener re-reads by seq. These tests check behaviour, not
// timing: docs/performance.md#notifications has the measurements.

// liveUpdateRound makes one of each kind of change on conv as owner-1 (an
// append with an effectful call, the effect's settlement, a receipt's
// filing), in one transaction, and returns the number of head moves
// and effect notifications it should send: one head move, the effect's
// birth and settlement, the receipt.
func liveUpdateRound(t testing.TB, db *pgxpool.Pool, conv, tag string) (heads, effects int) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, q := range []string{
			`SELECT convo.append_message('` + conv + `', 'assistant', '` + effToolUses(effBuy("toolu_"+tag, "buy", 500)) + `')`,
			`SELECT convo.settle_effect('` + conv + `', (SELECT effect_id FROM convo.effect_for_call('` + conv + `', 'toolu_` + tag + `')), 'applied', p_external_ref => 'ch_` + tag + `')`,
			`SELECT * FROM convo.begin_receipt('owner-1', 'receipt-key-` + tag + `', 'file_followup')`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return 1, 3
}

// TestLiveUpdatesOffForTheDatabase: with the database's live updates off, a
// head move, an effect transition and a receipt send nothing, from any
// session, while the head log and the event log still record each; turned
// on again, every change is heard once more, each head move's payload its
// head-log row. live_updates() says which, and set_by who set it.
func TestLiveUpdatesOffForTheDatabase(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	app := loginAs(t, db, "convo_app")
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	registerTestTool(t, db, "file_followup", true, followupSchema)
	conv := createConversation(t, db, "owner-1", "")
	heads, effects := listen(t, db, "convo_head"), listen(t, db, "convo_effect")

	requireEqual(t, "live_updates() before any DBA sets it", queryRow[bool](t, app, `SELECT convo.live_updates()`), true)
	mustExec(t, admin, `SELECT convo.set_live_updates(false)`)
	requireEqual(t, "live_updates() after set_live_updates(false)", queryRow[bool](t, app, `SELECT convo.live_updates()`), false)
	requireEqual(t, "settings.set_by", queryRow[string](t, db, `SELECT set_by FROM convo_private.settings`),
		queryRow[string](t, admin, `SELECT session_user::text`))

	logBefore := len(headLogNotes(t, db, conv))
	liveUpdateRound(t, db, conv, "off")
	// And an application's move, in a transaction that sets the owner.
	if err := asOwner(app, "owner-1", `SELECT convo.append_message($1, 'user', $2::jsonb)`, conv, textParts("quiet")); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "convo_head notifications with live updates off", len(heads.drain("convo_head")), 0)
	requireEqual(t, "convo_effect notifications with live updates off", len(effects.drain("convo_effect")), 0)
	requireEqual(t, "head-log rows written with live updates off", len(headLogNotes(t, db, conv))-logBefore, 2)
	requireEqual(t, "effect events written with live updates off", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.tool_effect_events WHERE conversation_id = $1`, conv), int64(2))
	requireEqual(t, "receipts written with live updates off", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.tool_receipts WHERE idempotency_key = 'receipt-key-off'`), int64(1))

	mustExec(t, admin, `SELECT convo.set_live_updates(true)`)
	requireEqual(t, "live_updates() after set_live_updates(true)", queryRow[bool](t, app, `SELECT convo.live_updates()`), true)
	logBefore = len(headLogNotes(t, db, conv))
	wantHeads, wantEffects := liveUpdateRound(t, db, conv, "on")
	var got []headNote
	for _, p := range heads.drain("convo_head") {
		var n headNote
		decodeExact(t, p, &n, headNoteKeys...)
		got = append(got, n)
	}
	requireEqual(t, "convo_head notifications with live updates on", len(got), wantHeads)
	requireSlice(t, "convo_head payloads with live updates on", stringsOf(got), stringsOf(headLogNotes(t, db, conv)[logBefore:]))
	requireEqual(t, "convo_effect notifications with live updates on", len(effects.drain("convo_effect")), wantEffects)
}

// TestLiveUpdatesReachOpenSessions: the switch reaches a session opened
// before it was set, at its next transaction (ALTER DATABASE ... SET
// convo.notify reaches only new sessions); with the database's live updates
// on, a session's own convo.notify = off still silences that session.
func TestLiveUpdatesReachOpenSessions(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	conv := createConversation(t, db, "owner-1", "")
	l := listen(t, db, "convo_head")
	writer := dedicatedConn(t, db) // opened, and heard, before the switch
	logBefore := len(headLogNotes(t, db, conv))
	ctx := context.Background()
	appendOn := func(text string) {
		t.Helper()
		if _, err := writer.Exec(ctx, `SELECT convo.append_message($1, 'user', $2::jsonb)`, conv, textParts(text)); err != nil {
			t.Fatal(err)
		}
	}
	appendOn("heard")
	requireEqual(t, "notifications before the switch", len(l.drain("convo_head")), 1)
	mustExec(t, admin, `SELECT convo.set_live_updates(false)`)
	appendOn("not heard")
	requireEqual(t, "notifications from an open session after the switch", len(l.drain("convo_head")), 0)
	mustExec(t, admin, `SELECT convo.set_live_updates(true)`)
	appendOn("heard again")
	requireEqual(t, "notifications from an open session switched on again", len(l.drain("convo_head")), 1)
	if _, err := writer.Exec(ctx, `SET convo.notify = off`); err != nil {
		t.Fatal(err)
	}
	appendOn("the session's own switch")
	requireEqual(t, "notifications from a session with convo.notify off", len(l.drain("convo_head")), 0)
	requireEqual(t, "head-log rows of the four appends", len(headLogNotes(t, db, conv))-logBefore, 4)
}

// TestLiveUpdatesRefusals: the application and the reader may read the
// switch but not set it (42501); NULL is CV011; none of them writes
// anything, and notifications stay on.
func TestLiveUpdatesRefusals(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	app := loginAs(t, db, "convo_app")
	reader := loginAs(t, db, "convo_reader")
	before := fingerprint(t, db)
	for _, c := range []struct {
		name string
		pool *pgxpool.Pool
		sql  string
		code string
	}{
		{"the application", app, `SELECT convo.set_live_updates(false)`, "42501"},
		{"the reader", reader, `SELECT convo.set_live_updates(false)`, "42501"},
		{"NULL by the DBA", admin, `SELECT convo.set_live_updates(NULL)`, "CV011"},
	} {
		_, err := c.pool.Exec(context.Background(), c.sql)
		if sqlState(err) != c.code {
			t.Errorf("%s: %s: got %v, want %s", c.name, c.sql, err, c.code)
		}
	}
	requireFingerprint(t, db, "the refused calls", before)
	requireEqual(t, "live_updates() to the reader", queryRow[bool](t, reader, `SELECT convo.live_updates()`), true)
	conv := createConversation(t, db, "owner-1", "")
	l := listen(t, db, "convo_head")
	appendMsg(t, db, conv, "user", textParts("still heard"))
	requireEqual(t, "notifications after the refused calls", len(l.drain("convo_head")), 1)
}
