package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Live updates: every head-log row is sent to channel
// convo_head and every effect or receipt transition to convo_effect, by the
// transaction that writes it, with a payload of ids, seq and reason or state
// only. The tests listen on a connection of their own, as a web server does.

// notifyMarker is planted in every kind of content and caller text the
// tests can reach; no payload may contain it.
const notifyMarker = "NOTIFYMARKER7c1e"

// listener is a connection that LISTENs on some channels.
type listener struct {
	t    testing.TB
	conn *pgx.Conn
	db   *pgxpool.Pool
}

// listen opens a connection of its own to db's database and LISTENs on each
// channel.
func listen(t testing.TB, db *pgxpool.Pool, channels ...string) *listener {
	t.Helper()
	conn := dedicatedConn(t, db)
	for _, ch := range channels {
		if _, err := conn.Exec(context.Background(), `LISTEN `+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatalf("LISTEN %s: %v", ch, err)
		}
	}
	return &listener{t: t, conn: conn, db: db}
}

// wait returns the next notification, or nil if none arrives within d.
func (l *listener) wait(d time.Duration) *pgconn.Notification {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	n, err := l.conn.WaitForNotification(ctx)
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return nil
	}
	if err != nil {
		l.t.Fatalf("waiting for a notification: %v", err)
	}
	if strings.Contains(n.Payload, notifyMarker) {
		l.t.Errorf("notification on %s carries the content marker: %s", n.Channel, n.Payload)
	}
	return n
}

// next returns the next notification, failing the test if none arrives
// within 5 seconds.
func (l *listener) next() *pgconn.Notification {
	l.t.Helper()
	n := l.wait(5 * time.Second)
	if n == nil {
		l.t.Fatal("no notification within 5 seconds")
	}
	return n
}

// drain returns the notifications on channel up to a marker notification
// sent now on that channel from another connection: everything that was
// committed before it, since notifications arrive in commit order.
func (l *listener) drain(channel string) []string {
	l.t.Helper()
	marker := "end-" + newID()
	mustExec(l.t, l.db, `SELECT pg_notify($1, $2)`, channel, marker)
	var payloads []string
	for {
		n := l.next()
		if n.Channel == channel && n.Payload == marker {
			return payloads
		}
		if n.Channel != channel {
			l.t.Fatalf("notification on %s, want only %s: %s", n.Channel, channel, n.Payload)
		}
		payloads = append(payloads, n.Payload)
	}
}

// decodeExact decodes payload into v, requiring exactly the keys of v's
// struct (json tags): nothing more, nothing missing.
func decodeExact(t testing.TB, payload string, v any, keys ...string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatalf("payload %s: %v", payload, err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(keys)
	if strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("payload %s has keys %v, want %v", payload, got, keys)
	}
	if err := json.Unmarshal([]byte(payload), v); err != nil {
		t.Fatalf("payload %s: %v", payload, err)
	}
}

// headNote is a convo_head payload.
type headNote struct {
	ConversationID string  `json:"conversation_id"`
	Seq            int64   `json:"seq"`
	HeadMessageID  string  `json:"head_message_id"`
	PreviousHeadID *string `json:"previous_head_id"`
	Reason         string  `json:"reason"`
}

var headNoteKeys = []string{"conversation_id", "seq", "head_message_id", "previous_head_id", "reason"}

// headLogNotes reads the head log of conv as the payloads it must have sent.
func headLogNotes(t testing.TB, db *pgxpool.Pool, conv string) []headNote {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT conversation_id::text, seq, head_message_id::text, previous_head_id::text, reason
		  FROM convo.conversation_head_log WHERE conversation_id = $1 ORDER BY seq`, conv)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (headNote, error) {
		var n headNote
		err := r.Scan(&n.ConversationID, &n.Seq, &n.HeadMessageID, &n.PreviousHeadID, &n.Reason)
		return n, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return notes
}

func (n headNote) String() string {
	prev := "null"
	if n.PreviousHeadID != nil {
		prev = *n.PreviousHeadID
	}
	return fmt.Sprintf("%s seq %d %s <- %s (%s)", n.ConversationID, n.Seq, n.HeadMessageID, prev, n.Reason)
}

// TestNotifyHeadMoves: every way the head moves (create, append, edit,
// regenerate, move_head, a generation's answer, a direct UPDATE by a
// superuser logged as direct_update) sends one convo_head notification whose
// payload is exactly its head-log row's ids, seq and reason, in order, and
// none carries content, the owner or the mover.
func TestNotifyHeadMoves(t *testing.T) {
	db := newDB(t)
	l := listen(t, db, "convo_head")
	marked := textParts("say " + notifyMarker)
	conv := queryRow[string](t, db, `SELECT convo.create_conversation($1, $2, $3::jsonb)::text`,
		"owner-"+notifyMarker, "You are "+notifyMarker, `{"m": "`+notifyMarker+`"}`)
	u1 := queryRow[string](t, db, `SELECT convo.append_message($1, 'user', $2::jsonb, p_moved_by => $3)::text`,
		conv, marked, "tab-"+notifyMarker)
	a1 := appendMsg(t, db, conv, "assistant", marked)
	u2 := editMsg(t, db, conv, u1, marked)
	a2 := appendMsg(t, db, conv, "assistant", marked)
	regenerateMsg(t, db, conv, a2, marked)
	moveHead(t, db, conv, a1)
	mustExec(t, db, `SELECT convo.move_head($1, $2, 'back_to_edit')`, conv, a2)
	gen := queryRow[string](t, db, `SELECT convo.begin_generation($1, $2, 'model-x')::text`, conv, u2)
	mustExec(t, db, `SELECT convo.complete_generation($1, $2, $3::jsonb)`, conv, gen, marked)
	mustExec(t, db, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, u1)
	// No move, no notification: an UPDATE that leaves the head, a move to where it is.
	mustExec(t, db, `UPDATE convo.conversations SET head_message_id = head_message_id WHERE id = $1`, conv)
	moveHead(t, db, conv, u1)

	var got []headNote
	for _, p := range l.drain("convo_head") {
		var n headNote
		decodeExact(t, p, &n, headNoteKeys...)
		got = append(got, n)
	}
	want := headLogNotes(t, db, conv)
	requireEqual(t, "reasons", strings.Join(reasonsOf(got), ","),
		"create,append,append,user_edit,append,regenerate,switch,back_to_edit,regenerate,direct_update")
	requireSlice(t, "convo_head payloads", stringsOf(got), stringsOf(want))
}

func reasonsOf(notes []headNote) []string {
	var out []string
	for _, n := range notes {
		out = append(out, n.Reason)
	}
	return out
}

func stringsOf[T fmt.Stringer](xs []T) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.String())
	}
	return out
}

// effectNote is a convo_effect payload: an effect transition or a receipt
// step, told apart by kind.
type effectNote struct {
	Kind           string `json:"kind"`
	ConversationID string `json:"conversation_id,omitempty"`
	EffectID       string `json:"effect_id,omitempty"`
	ReceiptID      string `json:"receipt_id,omitempty"`
	Seq            int64  `json:"seq,omitempty"`
	FromState      string `json:"from_state,omitempty"`
	State          string `json:"state"`
	Filled         bool   `json:"filled,omitempty"`
}

func (n effectNote) String() string {
	if n.Kind == "receipt" {
		return fmt.Sprintf("receipt %s %s filled=%v", n.ReceiptID, n.State, n.Filled)
	}
	return fmt.Sprintf("effect %s/%s seq %d %s->%s", n.ConversationID, n.EffectID, n.Seq, n.FromState, n.State)
}

// effectNotes decodes convo_effect payloads, each with exactly the keys of
// its kind.
func effectNotes(t testing.TB, payloads []string) []effectNote {
	t.Helper()
	var out []effectNote
	for _, p := range payloads {
		var n effectNote
		var kind struct{ Kind string }
		if err := json.Unmarshal([]byte(p), &kind); err != nil {
			t.Fatalf("payload %s: %v", p, err)
		}
		if kind.Kind == "receipt" {
			decodeExact(t, p, &n, "kind", "receipt_id", "state", "filled")
		} else {
			decodeExact(t, p, &n, "kind", "conversation_id", "effect_id", "seq", "from_state", "state")
		}
		out = append(out, n)
	}
	return out
}

// TestNotifyEffectTransitions: each transition of an effect (its creation
// in pending, applied, compensated; pending to failed; awaiting
// confirmation to pending and to failed) sends one convo_effect
// notification matching its tool_effect_events row; a receipt's filing,
// fill and outcome send one each. Nothing carries arguments, evidence,
// references, error codes, keys, requests or the owner.
func TestNotifyEffectTransitions(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "fork_args", "1 hour")
	registerTestTool(t, db, "file_followup", true, followupSchema)
	l := listen(t, db, "convo_effect")

	conv := createConversation(t, db, "owner-"+notifyMarker, "")
	u1 := appendMsg(t, db, conv, "user", textParts("buy "+notifyMarker))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_a", "buy", 500), effBuy("toolu_b", "buy", 700)))
	a := effForCall(t, db, conv, "toolu_a").EffectID
	b := effForCall(t, db, conv, "toolu_b").EffectID
	mustExec(t, db, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_evidence => $4::jsonb)`,
		conv, a, "ch_"+notifyMarker, `{"e": "`+notifyMarker+`"}`)
	mustExec(t, db, `SELECT convo.compensate_effect($1, $2, $3)`, conv, a, "re_"+notifyMarker)
	mustExec(t, db, `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => $3)`, conv, b, "err_"+notifyMarker)
	// A re-run on another branch (an edit of the same turn) waits for confirmation.
	editMsg(t, db, conv, u1, textParts("again "+notifyMarker))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_c", "buy", 501), effBuy("toolu_d", "buy", 701)))
	c := effForCall(t, db, conv, "toolu_c")
	d := effForCall(t, db, conv, "toolu_d")
	requireEqual(t, "toolu_c decision", c.Decision, "confirm")
	requireEqual(t, "toolu_d decision", d.Decision, "confirm")
	mustExec(t, db, `SELECT convo.confirm_effect($1, $2, $3)`, conv, c.EffectID, "staff-"+notifyMarker)
	mustExec(t, db, `SELECT convo.decline_effect($1, $2, $3)`, conv, d.EffectID, "staff-"+notifyMarker)

	got := effectNotes(t, l.drain("convo_effect"))
	rows, err := db.Query(context.Background(), `
		SELECT 'effect', conversation_id::text, effect_id::text, seq, from_state, to_state
		  FROM convo.tool_effect_events WHERE conversation_id = $1 ORDER BY seq`, conv)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (effectNote, error) {
		var n effectNote
		err := r.Scan(&n.Kind, &n.ConversationID, &n.EffectID, &n.Seq, &n.FromState, &n.State)
		return n, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 9 {
		t.Fatalf("%d effect events, want 9: %v", len(want), want)
	}
	requireSlice(t, "convo_effect payloads of effects", stringsOf(got), stringsOf(want))

	// Receipts: filed, filled, applied; filed, failed; filed, a fill that fails it (422).
	owner := "owner-" + notifyMarker
	r1 := beginReceipt(t, db, owner, "key-1-"+notifyMarker, "file_followup", `{"ticket_id": "`+notifyMarker+`"}`)
	mustExec(t, db, `SELECT * FROM convo.fill_receipt($1, $2::jsonb)`, r1.ID,
		`{"ticket_id": "TCK-1", "summary": "`+notifyMarker+`"}`)
	mustExec(t, db, `SELECT convo.apply_receipt($1, $2)`, r1.ID, "followup:"+notifyMarker)
	r2 := beginReceipt(t, db, owner, "key-2-"+notifyMarker, "file_followup", `{}`)
	mustExec(t, db, `SELECT convo.fail_receipt($1, 503, $2)`, r2.ID, "down_"+notifyMarker)
	r3 := beginReceipt(t, db, owner, "key-3-"+notifyMarker, "file_followup", `{}`)
	mustExec(t, db, `SELECT * FROM convo.fill_receipt($1, $2::jsonb)`, r3.ID, `{"summary": "`+notifyMarker+`"}`)
	beginReceipt(t, db, owner, "key-1-"+notifyMarker, "file_followup", `{"ticket_id": "`+notifyMarker+`"}`) // a repeat: nothing
	mustExec(t, db, `SELECT convo.erase_owner($1, 'test')`, owner)                                          // an erasure: nothing

	receipt := func(id, state string, filled bool) effectNote {
		return effectNote{Kind: "receipt", ReceiptID: id, State: state, Filled: filled}
	}
	requireSlice(t, "convo_effect payloads of receipts", stringsOf(effectNotes(t, l.drain("convo_effect"))), stringsOf([]effectNote{
		receipt(r1.ID, "pending", false), receipt(r1.ID, "pending", true), receipt(r1.ID, "applied", true),
		receipt(r2.ID, "pending", false), receipt(r2.ID, "failed", false),
		receipt(r3.ID, "pending", false), receipt(r3.ID, "failed", true),
	}))
}

// TestNotifyRolledBackIsNotSent: a head move, an effect transition and a
// receipt that roll back (explicitly, or because a later statement of the
// transaction fails) are never heard; a marker sent afterwards arrives
// first, proving the listener was live.
func TestNotifyRolledBackIsNotSent(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	registerTestTool(t, db, "file_followup", true, followupSchema)
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "user", textParts("buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_a", "buy", 500)))
	effect := effForCall(t, db, conv, "toolu_a").EffectID
	l := listen(t, db, "convo_head", "convo_effect")
	before := fingerprint(t, db)

	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT convo.append_message('` + conv + `', 'user', '[{"type": "text", "text": "hi"}]')`,
		`SELECT convo.settle_effect('` + conv + `', '` + effect + `', 'applied', p_external_ref => 'ch_1')`,
		`SELECT * FROM convo.begin_receipt('owner-1', 'key-rolled-back', 'file_followup')`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// A transaction whose last statement fails (CV001) rolls back its move too.
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', $2::jsonb)`, conv, textParts("x")); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', $2::jsonb, p_expected_head => $1)`, conv, textParts("y"))
		return err
	})
	requireSQLState(t, err, "CV001")
	requireFingerprint(t, db, "rolled back", before)

	if n := l.wait(time.Second); n != nil {
		t.Fatalf("a rolled-back change was heard on %s: %s", n.Channel, n.Payload)
	}
	if got := l.drain("convo_head"); len(got) != 0 {
		t.Fatalf("convo_head after the rollbacks: %v, want nothing before the marker", got)
	}
	if got := l.drain("convo_effect"); len(got) != 0 {
		t.Fatalf("convo_effect after the rollbacks: %v, want nothing before the marker", got)
	}
	// And the listener still hears a committed move.
	appendMsg(t, db, conv, "user", textParts("committed"))
	if got := l.drain("convo_head"); len(got) != 1 {
		t.Fatalf("convo_head after a committed append: %v, want one", got)
	}
}

// TestNotifyListenerOfAnyRole: LISTEN needs no privilege, so a login role
// with no pgconvo role at all hears every owner's moves: which is why the
// payload holds ids, seq and reason only (TestNotifyHeadMoves checks the
// keys), and the README says so.
func TestNotifyListenerOfAnyRole(t *testing.T) {
	db := newDB(t)
	stranger := loginAs(t, db)
	conn, err := stranger.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(context.Background(), `LISTEN convo_head`); err != nil {
		t.Fatalf("LISTEN as a role with no pgconvo role: %v", err)
	}
	conv := createConversation(t, db, "owner-1", "You are terse.")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("the stranger heard nothing: %v", err)
	}
	var note headNote
	decodeExact(t, n.Payload, &note, headNoteKeys...)
	requireEqual(t, "conversation heard", note.ConversationID, conv)
	// What it hears, it cannot read.
	err = conn.QueryRow(context.Background(), `SELECT count(*) FROM convo.path($1)`, conv).Scan(new(int64))
	requireSQLState(t, err, "42501")
	if _, err := conn.Exec(context.Background(), `UNLISTEN *`); err != nil {
		t.Fatal(err)
	}
}

// TestNotifySwitchedOff: with convo.notify off (here for a session; a DBA
// sets it per database or role) head moves, effect transitions and
// receipts send nothing, and the same changes send again once it is on.
func TestNotifySwitchedOff(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	registerTestTool(t, db, "file_followup", true, followupSchema)
	conv := createConversation(t, db, "owner-1", "")
	heads, effects := listen(t, db, "convo_head"), listen(t, db, "convo_effect")
	ctx := context.Background()
	run := func(notify string) {
		t.Helper()
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			for _, q := range []string{
				`SELECT set_config('convo.notify', '` + notify + `', true)`,
				`SELECT convo.append_message('` + conv + `', 'assistant', '` + effToolUses(effBuy("toolu_"+notify, "buy", 500)) + `')`,
				`SELECT convo.settle_effect('` + conv + `', (SELECT effect_id FROM convo.effect_for_call('` + conv + `', 'toolu_` + notify + `')), 'applied', p_external_ref => 'ch_` + notify + `')`,
				`SELECT * FROM convo.begin_receipt('owner-1', 'receipt-key-` + notify + `', 'file_followup')`,
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
	}
	run("off")
	requireEqual(t, "convo_head notifications with convo.notify off", len(heads.drain("convo_head")), 0)
	requireEqual(t, "convo_effect notifications with convo.notify off", len(effects.drain("convo_effect")), 0)
	run("on")
	requireEqual(t, "convo_head notifications with convo.notify on", len(heads.drain("convo_head")), 1)
	// The effect's birth (pending), its settlement (applied) and the receipt's filing.
	requireEqual(t, "convo_effect notifications with convo.notify on", len(effects.drain("convo_effect")), 3)
}
