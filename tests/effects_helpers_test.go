package tests

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Helpers for the effects-ledger tests (effects_test.go,
// effects_state_test.go, orphaned_test.go, purchase_test.go). Their names
// start with "eff" so that they keep clear of the helpers of other test
// files in the package. Ids travel as text; "" stands for NULL.

// effScopeKeyPattern is the form of a scope key: the scope's name, a
// colon and a sha256 in hex.
var effScopeKeyPattern = regexp.MustCompile(`^(tool_call|conversation_args|fork_args):[0-9a-f]{64}$`)

// effDecision is one row of convo.effect_for_call; "" and 0 stand for NULL.
type effDecision struct {
	EffectID    string
	Decision    string
	State       string
	Key         string
	ExternalRef string
	HTTPStatus  int32
	ErrorCode   string
}

const effDecisionColumns = `coalesce(effect_id::text, ''), decision, coalesce(state, ''), coalesce(idempotency_key, ''),
	coalesce(external_ref, ''), coalesce(http_status, 0), coalesce(error_code, '')`

// effForCall returns convo.effect_for_call(conv, callID), failing the test
// on error or unless there is exactly one row.
func effForCall(t testing.TB, db *pgxpool.Pool, conv, callID string) effDecision {
	t.Helper()
	d, err := effForCallErr(db, conv, callID)
	if err != nil {
		t.Fatalf("effect_for_call(%s): %v", callID, err)
	}
	return d
}

// effForCallErr is effForCall returning the error.
func effForCallErr(db *pgxpool.Pool, conv, callID string) (effDecision, error) {
	rows, err := db.Query(context.Background(),
		`SELECT `+effDecisionColumns+` FROM convo.effect_for_call($1, $2)`, conv, callID)
	if err != nil {
		return effDecision{}, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (effDecision, error) {
		var d effDecision
		err := r.Scan(&d.EffectID, &d.Decision, &d.State, &d.Key, &d.ExternalRef, &d.HTTPStatus, &d.ErrorCode)
		return d, err
	})
	if err != nil {
		return effDecision{}, err
	}
	if len(out) != 1 {
		return effDecision{}, fmt.Errorf("effect_for_call(%s) returned %d rows, want 1", callID, len(out))
	}
	return out[0], nil
}

// effEffect is a row of convo.tool_effects; "" and 0 stand for NULL.
type effEffect struct {
	ID, ToolName, Key, ScopeKey, State, Arguments string
	ToolVersion                                   int32
	AmountMinor                                   int64
	HasAmount                                     bool
	Currency, RepeatsEffectID                     string
	RequestedAt, DeadlineAt                       time.Time
	ConfirmedBy                                   string
	ConfirmedAt, SettledAt, CompensatedAt         *time.Time
	ExternalRef                                   string
	HTTPStatus                                    int32
	ErrorCode, CompensatedBy                      string
}

// effRead returns the effect id of conversation conv.
func effRead(t testing.TB, db *pgxpool.Pool, conv, id string) effEffect {
	t.Helper()
	var e effEffect
	var amount *int64
	err := db.QueryRow(context.Background(), `
		SELECT id::text, tool_name, tool_version, idempotency_key, scope_key, state, arguments::text,
		       amount_minor, coalesce(currency, ''), coalesce(repeats_effect_id::text, ''),
		       requested_at, deadline_at, coalesce(confirmed_by, ''), confirmed_at, settled_at,
		       coalesce(external_ref, ''), coalesce(http_status, 0), coalesce(error_code, ''),
		       coalesce(compensated_by, ''), compensated_at
		  FROM convo.tool_effects WHERE conversation_id = $1 AND id = $2`, conv, id).
		Scan(&e.ID, &e.ToolName, &e.ToolVersion, &e.Key, &e.ScopeKey, &e.State, &e.Arguments,
			&amount, &e.Currency, &e.RepeatsEffectID,
			&e.RequestedAt, &e.DeadlineAt, &e.ConfirmedBy, &e.ConfirmedAt, &e.SettledAt,
			&e.ExternalRef, &e.HTTPStatus, &e.ErrorCode, &e.CompensatedBy, &e.CompensatedAt)
	if err != nil {
		t.Fatalf("reading effect %s: %v", id, err)
	}
	if amount != nil {
		e.AmountMinor, e.HasAmount = *amount, true
	}
	return e
}

// effCallLink is a row of convo.tool_effect_calls.
type effCallLink struct {
	EffectID, MessageID, Decision, ForkPointID string
}

// effLink returns the ledger decision row of a tool call.
func effLink(t testing.TB, db *pgxpool.Pool, conv, callID string) effCallLink {
	t.Helper()
	var l effCallLink
	err := db.QueryRow(context.Background(), `
		SELECT effect_id::text, message_id::text, decision, coalesce(fork_point_id::text, '')
		  FROM convo.tool_effect_calls WHERE conversation_id = $1 AND tool_call_id = $2`, conv, callID).
		Scan(&l.EffectID, &l.MessageID, &l.Decision, &l.ForkPointID)
	if err != nil {
		t.Fatalf("reading the ledger decision of %s: %v", callID, err)
	}
	return l
}

// effCount returns the number of effects of conversation conv.
func effCount(t testing.TB, db *pgxpool.Pool, conv string) int64 {
	t.Helper()
	return queryRow[int64](t, db, `SELECT count(*) FROM convo.tool_effects WHERE conversation_id = $1`, conv)
}

// effEvent is a row of convo.tool_effect_events.
type effEvent struct {
	EffectID, From, To, Actor, Evidence string
}

// effEvents returns the events of conversation conv in seq order.
func effEvents(t testing.TB, db *pgxpool.Pool, conv string) []effEvent {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT effect_id::text, from_state, to_state, coalesce(actor, ''), evidence::text
		  FROM convo.tool_effect_events WHERE conversation_id = $1 ORDER BY seq`, conv)
	if err != nil {
		t.Fatalf("reading events: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (effEvent, error) {
		var e effEvent
		err := r.Scan(&e.EffectID, &e.From, &e.To, &e.Actor, &e.Evidence)
		return e, err
	})
	if err != nil {
		t.Fatalf("reading events: %v", err)
	}
	return out
}

// effLedger returns every row version of the three ledger tables (xmin,
// ctid and content), so that equal snapshots prove that nothing was
// inserted, updated or deleted, not even a row rewritten with the same
// values.
func effLedger(t testing.TB, db *pgxpool.Pool) string {
	t.Helper()
	return queryRow[string](t, db, `
		SELECT concat_ws(E'\n',
		  (SELECT string_agg(xmin::text || ' ' || ctid::text || ' ' || to_jsonb(e)::text, E'\n' ORDER BY conversation_id, id)
		     FROM convo.tool_effects e),
		  (SELECT string_agg(xmin::text || ' ' || ctid::text || ' ' || to_jsonb(l)::text, E'\n' ORDER BY conversation_id, tool_call_id)
		     FROM convo.tool_effect_calls l),
		  (SELECT string_agg(xmin::text || ' ' || ctid::text || ' ' || to_jsonb(v)::text, E'\n' ORDER BY seq)
		     FROM convo.tool_effect_events v),
		  (SELECT count(*)::text FROM convo.tool_effect_events))`)
}

// requireLedgerUnchanged fails if the ledger differs from before.
func requireLedgerUnchanged(t testing.TB, db *pgxpool.Pool, what, before string) {
	t.Helper()
	if after := effLedger(t, db); after != before {
		t.Fatalf("%s changed the ledger:\n before\n%s\n after\n%s", what, before, after)
	}
}

// effOrphan is a row of convo.orphaned_applied_effects.
type effOrphan struct {
	EffectID, ToolName, ExternalRef string
	AmountMinor                     int64
	Currency                        string
	SettledAt                       time.Time
	ToolCallIDs                     []string
}

// effOrphans returns the rows of orphaned_applied_effects for conv, by effect id.
func effOrphans(t testing.TB, db *pgxpool.Pool, conv string) []effOrphan {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT effect_id::text, tool_name, external_ref, coalesce(amount_minor, 0), coalesce(currency, ''),
		       settled_at, tool_call_ids
		  FROM convo.orphaned_applied_effects WHERE conversation_id = $1 ORDER BY effect_id`, conv)
	if err != nil {
		t.Fatalf("reading orphaned_applied_effects: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (effOrphan, error) {
		var o effOrphan
		err := r.Scan(&o.EffectID, &o.ToolName, &o.ExternalRef, &o.AmountMinor, &o.Currency, &o.SettledAt, &o.ToolCallIDs)
		return o, err
	})
	if err != nil {
		t.Fatalf("reading orphaned_applied_effects: %v", err)
	}
	return out
}

// effOrphanIDs returns the effect ids of effOrphans.
func effOrphanIDs(t testing.TB, db *pgxpool.Pool, conv string) []string {
	t.Helper()
	var out []string
	for _, o := range effOrphans(t, db, conv) {
		out = append(out, o.EffectID)
	}
	return out
}

// effStale is a row of convo.stale_pending_effects.
type effStale struct {
	EffectID, ToolName, State, Key string
	RequestedAt, DeadlineAt        time.Time
}

// effStales returns the rows of stale_pending_effects for conv.
func effStales(t testing.TB, db *pgxpool.Pool, conv string) []effStale {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT effect_id::text, tool_name, state, idempotency_key, requested_at, deadline_at
		  FROM convo.stale_pending_effects WHERE conversation_id = $1 ORDER BY requested_at`, conv)
	if err != nil {
		t.Fatalf("reading stale_pending_effects: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (effStale, error) {
		var s effStale
		err := r.Scan(&s.EffectID, &s.ToolName, &s.State, &s.Key, &s.RequestedAt, &s.DeadlineAt)
		return s, err
	})
	if err != nil {
		t.Fatalf("reading stale_pending_effects: %v", err)
	}
	return out
}

// effExecErr runs sql and returns its error (nil on success).
func effExecErr(db *pgxpool.Pool, sql string, args ...any) error {
	_, err := db.Exec(context.Background(), sql, args...)
	return err
}
