package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// effStates are the five effect states.
var effStates = []string{"awaiting_confirmation", "pending", "applied", "failed", "compensated"}

// effContractTransitions are the transitions the contract allows
// ("awaiting_confirmation to pending or failed; pending to applied or
// failed; applied to compensated; nothing else").
var effContractTransitions = map[[2]string]bool{
	{"awaiting_confirmation", "pending"}: true,
	{"awaiting_confirmation", "failed"}:  true,
	{"pending", "applied"}:               true,
	{"pending", "failed"}:                true,
	{"applied", "compensated"}:           true,
}

// effSetTo is, for each target state, the SET list of a direct UPDATE that
// moves an effect there with every column its CHECKs need (right-hand
// sides read the old row): so that a CV006 comes from the state machine
// and not from a CHECK, which TestEffectStateMachineDirectUpdates proves by
// running each UPDATE with the triggers disabled first. $3 is another
// effect of the conversation, for repeats_effect_id.
var effSetTo = map[string]string{
	"awaiting_confirmation": `state = 'awaiting_confirmation', settled_at = NULL, external_ref = NULL, error_code = NULL,
		http_status = NULL, compensated_by = NULL, compensated_at = NULL, confirmed_by = NULL, confirmed_at = NULL,
		repeats_effect_id = coalesce(repeats_effect_id, $3::uuid), idempotency_key = scope_key`,
	"pending": `state = 'pending', settled_at = NULL, external_ref = NULL, error_code = NULL, http_status = NULL,
		compensated_by = NULL, compensated_at = NULL,
		idempotency_key = CASE WHEN state = 'awaiting_confirmation' THEN 'rerun:direct:' || id ELSE idempotency_key END,
		confirmed_by = CASE WHEN state = 'awaiting_confirmation' THEN 'dba' ELSE confirmed_by END,
		confirmed_at = CASE WHEN state = 'awaiting_confirmation' THEN clock_timestamp() ELSE confirmed_at END`,
	"applied": `state = 'applied', external_ref = coalesce(external_ref, 'ch_direct'), http_status = coalesce(http_status, 200),
		settled_at = coalesce(settled_at, clock_timestamp()), error_code = NULL, compensated_by = NULL, compensated_at = NULL`,
	"failed": `state = 'failed', error_code = coalesce(error_code, 'direct_failure'), settled_at = coalesce(settled_at, clock_timestamp()),
		external_ref = NULL, compensated_by = NULL, compensated_at = NULL`,
	"compensated": `state = 'compensated', compensated_by = coalesce(compensated_by, 're_direct'),
		compensated_at = coalesce(compensated_at, clock_timestamp()), external_ref = coalesce(external_ref, 'ch_direct'),
		settled_at = coalesce(settled_at, clock_timestamp()), error_code = NULL`,
}

// effInState makes a conversation of its own with a fresh effect of tool
// (a tool_call-scoped tool) in state, reached through the API, and returns
// the conversation, the effect and another effect of the conversation
// (the first call's, which an awaiting one repeats).
func effInState(t testing.TB, db *pgxpool.Pool, tool, state string) (conv, effect, other string) {
	t.Helper()
	conv = createConversation(t, db, "owner-1", "You sell credits.")
	u1 := appendMsg(t, db, conv, "user", textParts("Buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("first", tool, 500)))
	first := effForCall(t, db, conv, "first").EffectID
	switch state {
	case "awaiting_confirmation":
		editMsg(t, db, conv, u1, textParts("Buy, please"))
		appendMsg(t, db, conv, "assistant", effToolUses(effBuy("again", tool, 500)))
		d := effForCall(t, db, conv, "again")
		requireEqual(t, "re-run decision", d.Decision, "confirm")
		return conv, d.EffectID, first
	case "pending":
	case "applied":
		effSettle(t, db, conv, first, "ch_1")
	case "failed":
		effFail(t, db, conv, first, "card_declined")
	case "compensated":
		effSettle(t, db, conv, first, "ch_1")
		effCompensate(t, db, conv, first, "re_1")
	default:
		t.Fatalf("unknown state %s", state)
	}
	requireEqual(t, "state reached", effRead(t, db, conv, first).State, state)
	// A second effect on the same branch, below the first: executed.
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("second", tool, 600)))
	return conv, first, effForCall(t, db, conv, "second").EffectID
}

// effRowJSON returns the effect's row as jsonb text.
func effRowJSON(t testing.TB, db *pgxpool.Pool, conv, effect string) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT to_jsonb(e)::text FROM convo.tool_effects e WHERE conversation_id = $1 AND id = $2`, conv, effect)
}

// effEventCount returns the number of events of one effect.
func effEventCount(t testing.TB, db *pgxpool.Pool, conv, effect string) int64 {
	t.Helper()
	return queryRow[int64](t, db, `SELECT count(*) FROM convo.tool_effect_events WHERE conversation_id = $1 AND effect_id = $2`, conv, effect)
}

// effWithoutTriggers runs sql with the ledger's row triggers disabled, in a
// transaction that is always rolled back, and returns its error: it shows
// what the CHECK constraints alone say of a row.
func effWithoutTriggers(t testing.TB, db *pgxpool.Pool, sql string, args ...any) error {
	t.Helper()
	ctx := context.Background()
	errRollback := errors.New("rollback")
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `ALTER TABLE convo.tool_effects
			DISABLE TRIGGER tool_effects_20_transition, DISABLE TRIGGER tool_effects_30_log_direct`); err != nil {
			t.Fatalf("disabling triggers: %v", err)
		}
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

// TestEffectStateMachineDirectUpdates: for every (from, to) pair of the
// five states, an effect put in from through the API, then a direct UPDATE
// by the table owner to to, with the columns the CHECKs need: the
// contract's five transitions pass and append exactly one event; every
// other pair, a same-state pair that changes a column included, raises
// CV006 and changes nothing.
func TestEffectStateMachineDirectUpdates(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const tool = "buy"
	effRegisterPurchase(t, db, tool, "tool_call", "20 seconds")
	session := queryRow[string](t, db, `SELECT session_user::text`)

	// The state machine is data: its rows are the contract's transitions
	// plus the three ways an effect starts.
	got := queryRow[[]string](t, db, `SELECT array_agg(from_state || '>' || to_state ORDER BY from_state, to_state) FROM convo.effect_transitions`)
	want := []string{"applied>compensated", "awaiting_confirmation>failed", "awaiting_confirmation>pending",
		"pending>applied", "pending>failed", "requested>awaiting_confirmation", "requested>failed", "requested>pending"}
	requireSlice(t, "effect_transitions", got, want)

	for _, from := range effStates {
		for _, to := range effStates {
			t.Run(from+" to "+to, func(t *testing.T) {
				conv, effect, other := effInState(t, db, tool, from)
				sql := `UPDATE convo.tool_effects SET ` + effSetTo[to]
				if from == to {
					sql += `, deadline_at = deadline_at + interval '1 minute'` // a change, without a change of state
				}
				sql += ` WHERE conversation_id = $1 AND id = $2 AND $3::uuid IS NOT NULL`
				if err := effWithoutTriggers(t, db, sql, conv, effect, other); err != nil {
					t.Fatalf("the UPDATE breaks a CHECK even without the state machine: %v", err)
				}
				row, events := effRowJSON(t, db, conv, effect), effEventCount(t, db, conv, effect)
				err := effExecErr(db, sql, conv, effect, other)
				if !effContractTransitions[[2]string{from, to}] {
					requireSQLState(t, err, "CV006")
					requireEqual(t, "row", effRowJSON(t, db, conv, effect), row)
					requireEqual(t, "events", effEventCount(t, db, conv, effect), events)
					return
				}
				if err != nil {
					t.Fatalf("a transition of the contract: %v", err)
				}
				requireEqual(t, "state", effRead(t, db, conv, effect).State, to)
				requireEqual(t, "events", effEventCount(t, db, conv, effect), events+1)
				var ev effEvent
				if err := db.QueryRow(context.Background(), `
					SELECT effect_id::text, from_state, to_state, coalesce(actor, ''), evidence::text FROM convo.tool_effect_events
					 WHERE conversation_id = $1 ORDER BY seq DESC LIMIT 1`, conv).
					Scan(&ev.EffectID, &ev.From, &ev.To, &ev.Actor, &ev.Evidence); err != nil {
					t.Fatal(err)
				}
				requireEqual(t, "event", ev, effEvent{effect, from, to, session, `{}`})
			})
		}
	}
}

// TestEffectTransitionChangesOnlyItsColumns: a transition that also
// changes a column it does not list, and any change without a change of
// state (after settlement above all), raises CV006 and changes nothing.
func TestEffectTransitionChangesOnlyItsColumns(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const tool = "buy"
	effRegisterPurchase(t, db, tool, "tool_call", "20 seconds")
	cases := []struct{ name, from, set string }{
		{"pending to applied, and amount_minor", "pending", effSetTo["applied"] + `, amount_minor = 1`},
		{"pending to applied, and requested_at", "pending", effSetTo["applied"] + `, requested_at = requested_at - interval '1 day'`},
		{"pending to applied, and idempotency_key", "pending", effSetTo["applied"] + `, idempotency_key = 'another-key'`},
		{"pending to failed, and arguments", "pending", effSetTo["failed"] + `, arguments = '{}'`},
		{"pending to failed, and deadline_at", "pending", effSetTo["failed"] + `, deadline_at = deadline_at + interval '1 hour'`},
		{"awaiting to pending, and currency", "awaiting_confirmation", effSetTo["pending"] + `, currency = 'USD'`},
		{"awaiting to pending, and arguments", "awaiting_confirmation", effSetTo["pending"] + `, arguments = '{}'`},
		{"awaiting to failed, and idempotency_key", "awaiting_confirmation", effSetTo["failed"] + `, idempotency_key = 'another-key'`},
		{"awaiting to failed, and confirmed_by", "awaiting_confirmation", effSetTo["failed"] + `, confirmed_by = 'dba', confirmed_at = clock_timestamp(), idempotency_key = 'another-key'`},
		{"applied to compensated, and external_ref", "applied",
			`state = 'compensated', compensated_by = 're_1', compensated_at = clock_timestamp(), external_ref = 'ch_other'`},
		{"applied to compensated, and settled_at", "applied",
			`state = 'compensated', compensated_by = 're_1', compensated_at = clock_timestamp(), settled_at = clock_timestamp()`},
		{"pending, amount_minor only", "pending", `amount_minor = 1`},
		{"pending, deadline_at only", "pending", `deadline_at = deadline_at + interval '1 hour'`},
		{"awaiting, amount_minor only", "awaiting_confirmation", `amount_minor = 1`},
		{"applied, http_status only", "applied", `http_status = 201`},
		{"applied, external_ref only", "applied", `external_ref = 'ch_other'`},
		{"failed, error_code only", "failed", `error_code = 'other'`},
		{"failed, settled_at only", "failed", `settled_at = clock_timestamp()`},
		{"compensated, compensated_by only", "compensated", `compensated_by = 're_other'`},
		{"compensated, arguments only", "compensated", `arguments = '{"amount_minor": 1}'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conv, effect, other := effInState(t, db, tool, c.from)
			sql := `UPDATE convo.tool_effects SET ` + c.set + ` WHERE conversation_id = $1 AND id = $2 AND $3::uuid IS NOT NULL`
			if err := effWithoutTriggers(t, db, sql, conv, effect, other); err != nil {
				t.Fatalf("the UPDATE breaks a CHECK even without the state machine: %v", err)
			}
			before := effLedger(t, db)
			requireSQLState(t, effExecErr(db, sql, conv, effect, other), "CV006")
			requireLedgerUnchanged(t, db, c.name, before)
		})
	}
}

// TestEffectNoOpUpdate: an UPDATE that changes nothing is not a
// transition. tool_effects_transition lets an identical row through
// ("without a change of state nothing changes"), so the statement must
// either succeed and log no event, or be refused as a whole with CV006;
// in neither case may the event log get a row for a transition that is
// not in effect_transitions.
func TestEffectNoOpUpdate(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const tool = "buy"
	effRegisterPurchase(t, db, tool, "tool_call", "20 seconds")
	for _, state := range effStates {
		t.Run(state, func(t *testing.T) {
			conv, effect, _ := effInState(t, db, tool, state)
			row, events := effRowJSON(t, db, conv, effect), effEventCount(t, db, conv, effect)
			for _, sql := range []string{
				`UPDATE convo.tool_effects SET state = state WHERE conversation_id = $1 AND id = $2`,
				`UPDATE convo.tool_effects SET state = '` + state + `', external_ref = external_ref WHERE conversation_id = $1 AND id = $2`,
			} {
				err := effExecErr(db, sql, conv, effect)
				if err != nil && sqlState(err) != "CV006" {
					t.Errorf("%s: want success (no event) or CV006, got %v", sql, err)
				}
				requireEqual(t, "row", effRowJSON(t, db, conv, effect), row)
				requireEqual(t, "events", effEventCount(t, db, conv, effect), events)
			}
		})
	}
}

// TestEffectDirectInsert: an effect starts in a state reachable from
// 'requested' (pending, awaiting_confirmation, failed); inserting one
// directly in applied or compensated raises CV006.
func TestEffectDirectInsert(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	_, base, _ := effInState(t, db, "buy", "pending")
	for _, c := range []struct{ state, overrides string }{
		{"applied", `{"state": "applied", "external_ref": "ch_forged", "http_status": 200, "settled_at": "2024-01-01T00:00:00Z"}`},
		{"compensated", `{"state": "compensated", "external_ref": "ch_forged", "settled_at": "2024-01-01T00:00:00Z",
			"compensated_by": "re_forged", "compensated_at": "2024-01-01T00:00:00Z"}`},
	} {
		t.Run(c.state, func(t *testing.T) {
			args := effInsertArgs(base, c.overrides)
			if err := effWithoutTriggers(t, db, effInsertSQL, args...); err != nil {
				t.Fatalf("the row breaks a CHECK even without the state machine: %v", err)
			}
			before := effLedger(t, db)
			requireSQLState(t, effExecErr(db, effInsertSQL, args...), "CV006")
			requireLedgerUnchanged(t, db, "a direct INSERT in "+c.state, before)
		})
	}
}

// effInsertSQL inserts a copy of effect $1 with the jsonb objects $2 and
// then $3 laid over it (later keys win).
const effInsertSQL = `INSERT INTO convo.tool_effects
	SELECT (jsonb_populate_record(NULL::convo.tool_effects, to_jsonb(e) || $2::jsonb || $3::jsonb)).*
	  FROM convo.tool_effects e WHERE e.id = $1`

// effInsertArgs returns the arguments of effInsertSQL for a copy of effect
// base under a fresh id and fresh keys, with overrides (a JSON object in
// which "SELF" stands for the new id) laid over it.
func effInsertArgs(base, overrides string) []any {
	id := newID()
	fresh := fmt.Sprintf(`{"id": %q, "idempotency_key": %q, "scope_key": %q}`, id, "direct:"+id, "direct:"+id)
	return []any{base, fresh, strings.ReplaceAll(overrides, `"SELF"`, `"`+id+`"`)}
}

// TestEffectCheckConstraints: each CHECK of tool_effects, tried with a row
// that the state machine lets through but that breaks it: 23514, naming
// that constraint; nothing is written.
func TestEffectCheckConstraints(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	const tool = "buy"
	effRegisterPurchase(t, db, tool, "tool_call", "20 seconds")
	defs := map[string]string{}
	rows, err := db.Query(ctx, `SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'convo.tool_effects'::regclass AND contype = 'c'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	// Fragments of the constraint definitions, as pg_get_constraintdef prints them.
	const (
		settled      = `= (settled_at IS NOT NULL)`
		externalRef  = `= (external_ref IS NOT NULL)`
		errorCode    = `(state = 'failed'::text) = (error_code IS NOT NULL)`
		compensated  = `(state = 'compensated'::text) = (compensated_by IS NOT NULL)`
		compPair     = `(compensated_by IS NULL) = (compensated_at IS NULL)`
		confirmPair  = `(confirmed_by IS NULL) = (confirmed_at IS NULL)`
		awaitingNone = `(state <> 'awaiting_confirmation'::text) OR (confirmed_by IS NULL)`
		awaitingKey  = `(repeats_effect_id IS NOT NULL) AND (idempotency_key = scope_key)`
		confirmedKey = `(repeats_effect_id IS NOT NULL) AND (idempotency_key <> scope_key)`
		httpSettled  = `(http_status IS NULL) OR`
		httpRange    = `(http_status >= 100) AND (http_status <= 599)`
		notItself    = `repeats_effect_id IS DISTINCT FROM id`
		currencyCode = `currency ~`
		keyLength    = `length(idempotency_key)`
	)
	const now = `"2024-01-01T00:00:00Z"`

	type checkCase struct {
		name, from string
		insert     string   // overrides for a direct INSERT of a copy of the effect, or
		update     string   // the SET list of a direct UPDATE of it ($3: another effect)
		want       []string // the fragment(s) the violated constraint's definition has
	}
	cases := []checkCase{
		// Inserts: requested to pending, awaiting_confirmation or failed passes the state machine.
		{name: "error_code on a pending effect", from: "pending", insert: `{"error_code": "x"}`, want: []string{errorCode}},
		{name: "settled_at on a pending effect", from: "pending", insert: `{"settled_at": ` + now + `}`, want: []string{settled}},
		{name: "http_status on a pending effect", from: "pending", insert: `{"http_status": 200}`, want: []string{httpSettled}},
		{name: "external_ref on a pending effect", from: "pending", insert: `{"external_ref": "ch_1"}`, want: []string{externalRef}},
		{name: "failed without error_code", from: "pending", insert: `{"state": "failed", "settled_at": ` + now + `}`, want: []string{errorCode}},
		{name: "failed without settled_at", from: "pending", insert: `{"state": "failed", "error_code": "x"}`, want: []string{settled}},
		{name: "failed with external_ref", from: "pending",
			insert: `{"state": "failed", "error_code": "x", "settled_at": ` + now + `, "external_ref": "ch_1"}`, want: []string{externalRef}},
		{name: "failed with compensated_by", from: "pending",
			insert: `{"state": "failed", "error_code": "x", "settled_at": ` + now + `, "compensated_by": "re_1", "compensated_at": ` + now + `}`,
			want:   []string{compensated}},
		{name: "http_status 600", from: "pending",
			insert: `{"state": "failed", "error_code": "x", "settled_at": ` + now + `, "http_status": 600}`, want: []string{httpRange}},
		{name: "confirmed_by on awaiting_confirmation", from: "awaiting_confirmation",
			insert: `{"confirmed_by": "ana", "confirmed_at": ` + now + `}`, want: []string{awaitingNone, confirmedKey}},
		{name: "awaiting_confirmation without repeats_effect_id", from: "awaiting_confirmation",
			insert: `{"repeats_effect_id": null}`, want: []string{awaitingKey}},
		{name: "awaiting_confirmation under a key other than its scope key", from: "awaiting_confirmation",
			insert: `{"idempotency_key": "another-key"}`, want: []string{awaitingKey}},
		{name: "confirmed_by without confirmed_at", from: "awaiting_confirmation",
			insert: `{"state": "pending", "confirmed_by": "ana", "idempotency_key": "rerun-key"}`, want: []string{confirmPair}},
		{name: "a confirmed effect under its scope key", from: "awaiting_confirmation",
			insert: `{"state": "pending", "confirmed_by": "ana", "confirmed_at": ` + now + `}`, want: []string{confirmedKey}},
		{name: "a confirmed effect that repeats nothing", from: "pending",
			insert: `{"confirmed_by": "ana", "confirmed_at": ` + now + `, "idempotency_key": "rerun-key"}`, want: []string{confirmedKey}},
		{name: "an effect that repeats itself", from: "pending", insert: `{"repeats_effect_id": "SELF"}`, want: []string{notItself}},
		{name: "a lower-case currency", from: "pending", insert: `{"currency": "eur"}`, want: []string{currencyCode}},
		{name: "a key of 7 characters", from: "pending", insert: `{"idempotency_key": "1234567"}`, want: []string{keyLength}},
		{name: "a key of 256 characters", from: "pending", insert: `{"idempotency_key": "` + strings.Repeat("k", 256) + `"}`, want: []string{keyLength}},

		// Updates along a transition of the state machine that leave out what the target state needs.
		{name: "applied without external_ref", from: "pending", update: `state = 'applied', settled_at = clock_timestamp()`, want: []string{externalRef}},
		{name: "applied without settled_at", from: "pending", update: `state = 'applied', external_ref = 'ch_1'`, want: []string{settled}},
		{name: "applied with HTTP status 99", from: "pending",
			update: `state = 'applied', external_ref = 'ch_1', settled_at = clock_timestamp(), http_status = 99`, want: []string{httpRange}},
		{name: "failed without error_code (update)", from: "pending", update: `state = 'failed', settled_at = clock_timestamp()`, want: []string{errorCode}},
		{name: "declined without error_code", from: "awaiting_confirmation", update: `state = 'failed', settled_at = clock_timestamp()`, want: []string{errorCode}},
		{name: "compensated without compensated_by", from: "applied", update: `state = 'compensated'`, want: []string{compensated}},
		{name: "compensated_by without compensated_at", from: "applied", update: `state = 'compensated', compensated_by = 're_1'`, want: []string{compPair}},
		{name: "compensated_at without compensated_by", from: "applied", update: `state = 'compensated', compensated_at = clock_timestamp()`, want: []string{compensated, compPair}},
		{name: "confirmed under the scope key", from: "awaiting_confirmation",
			update: `state = 'pending', confirmed_by = 'ana', confirmed_at = clock_timestamp()`, want: []string{confirmedKey}},
		{name: "confirmed without confirmed_at", from: "awaiting_confirmation",
			update: `state = 'pending', confirmed_by = 'ana', idempotency_key = 'rerun:' || id`, want: []string{confirmPair}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conv, effect, other := effInState(t, db, tool, c.from)
			var sql string
			var args []any
			if c.insert != "" {
				sql, args = effInsertSQL, effInsertArgs(effect, c.insert)
			} else {
				sql = `UPDATE convo.tool_effects SET ` + c.update + ` WHERE conversation_id = $1 AND id = $2 AND $3::uuid IS NOT NULL`
				args = []any{conv, effect, other}
			}
			before := effLedger(t, db)
			err := effExecErr(db, sql, args...)
			requireSQLState(t, err, "23514")
			requireLedgerUnchanged(t, db, c.name, before)
			name := pgError(t, err).ConstraintName
			def, ok := defs[name]
			if !ok {
				t.Fatalf("the error names constraint %q, which is not a CHECK of tool_effects: %v", name, err)
			}
			for _, fragment := range c.want {
				if strings.Contains(def, fragment) {
					return
				}
			}
			t.Fatalf("violated %s: %s; want the constraint with %q", name, def, c.want)
		})
	}
}

// TestEffectLedgerAppendOnly: the event log and the call decisions are
// append-only, effects are never deleted, and the state machine is fixed:
// CV005 (a plain TRUNCATE of a table that foreign keys reference may fail
// with 0A000 first) for a superuser, the owner role, a granted non-superuser
// and a superuser session in replica mode; and the state machine holds for
// all of them.
func TestEffectLedgerAppendOnly(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	conv, compensated, _ := effInState(t, db, "buy", "compensated")
	effInState(t, db, "buy", "awaiting_confirmation")
	requireEqual(t, "events of the compensated effect", effEventCount(t, db, conv, compensated), int64(3))
	grantee := createGrantedRole(t, db)
	before := effLedger(t, db)
	transitions := queryRow[string](t, db, `SELECT string_agg(to_jsonb(t)::text, ',' ORDER BY from_state, to_state) FROM convo.effect_transitions t`)

	statements := []struct {
		name, sql string
		codes     []string
	}{
		{"UPDATE tool_effect_events", `UPDATE convo.tool_effect_events SET actor = 'forger'`, []string{"CV005"}},
		{"DELETE tool_effect_events", `DELETE FROM convo.tool_effect_events`, []string{"CV005"}},
		{"TRUNCATE tool_effect_events", `TRUNCATE convo.tool_effect_events`, []string{"CV005"}},
		{"UPDATE tool_effect_calls", `UPDATE convo.tool_effect_calls SET decision = 'execute'`, []string{"CV005"}},
		{"DELETE tool_effect_calls", `DELETE FROM convo.tool_effect_calls`, []string{"CV005"}},
		{"TRUNCATE tool_effect_calls", `TRUNCATE convo.tool_effect_calls`, []string{"CV005"}},
		{"DELETE tool_effects", `DELETE FROM convo.tool_effects`, []string{"CV005"}},
		{"TRUNCATE tool_effects", `TRUNCATE convo.tool_effects`, []string{"CV005", "0A000"}},
		{"TRUNCATE tool_effects CASCADE", `TRUNCATE convo.tool_effects CASCADE`, []string{"CV005"}},
		{"UPDATE tool_effects back to pending", `UPDATE convo.tool_effects SET state = 'pending', compensated_by = NULL,
			compensated_at = NULL, external_ref = NULL, settled_at = NULL, http_status = NULL WHERE state = 'compensated'`,
			[]string{"CV006", "CV005"}}, // CV005 for the grantee: only pgconvo's code writes the ledger
		{"INSERT effect_transitions", `INSERT INTO convo.effect_transitions VALUES ('compensated', 'applied', '{}')`, []string{"CV005"}},
		{"UPDATE effect_transitions", `UPDATE convo.effect_transitions SET changes = '{amount_minor}'`, []string{"CV005"}},
		{"DELETE effect_transitions", `DELETE FROM convo.effect_transitions`, []string{"CV005"}},
		{"TRUNCATE effect_transitions", `TRUNCATE convo.effect_transitions`, []string{"CV005", "0A000"}},
		{"TRUNCATE effect_transitions CASCADE", `TRUNCATE convo.effect_transitions CASCADE`, []string{"CV005"}},
	}
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		for _, st := range statements {
			t.Run(st.name, func(t *testing.T) {
				_, err := conn.Exec(ctx, st.sql) // autocommit: a slip would stay
				code := sqlState(err)
				for _, c := range st.codes {
					if code == c {
						return
					}
				}
				t.Fatalf("want SQLSTATE %v, got %v", st.codes, err)
			})
		}
	})
	requireLedgerUnchanged(t, db, "the refused statements", before)
	requireEqual(t, "effect_transitions", queryRow[string](t, db,
		`SELECT string_agg(to_jsonb(t)::text, ',' ORDER BY from_state, to_state) FROM convo.effect_transitions t`), transitions)
}
