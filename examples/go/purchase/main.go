// Command purchase tells the seed's purchase story from Go, with pgx: a
// charge is applied; an edit re-runs the same purchase (reused, not charged
// twice); a second edit asks for another amount (held for confirmation,
// then confirmed and charged); the first charge, now on no live branch, is
// listed as orphaned until a refund compensates it. examples/purchase.sql,
// examples/node and examples/python tell the same story.
//
// Run it from the repository root with:
//
//	DATABASE_URL=... go run ./examples/go/purchase
//
// DATABASE_URL connects as the application (a login member of convo_app);
// ADMIN_DATABASE_URL, if set, as the DBA (a member of convo_admin) for
// register_tool. Unset, DATABASE_URL does both (the superuser URL that
// `migrate up` prints may). The same URL works straight to PostgreSQL and
// through a pooler in transaction mode, such as PgBouncer (connect says why).
// Every run makes a conversation of its own, so it can run again on the same
// database. It prints each step and
// exits 1 on any mismatch; tests/examples_test.go runs it twice. Whatever
// stops it (no DATABASE_URL, a failed check, a database error) is said in
// one line on stderr, with what to do.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const name = "examples/go/purchase"

const owner = "customer-7"

// schema is the argument schema README.md's first block registers, exactly.
// jsonb goes in as JSON text: a string (json.Marshal's output, say), which
// pgx sends as it is in every query exec mode.
const schema = `{"type": "object", "required": ["amount_minor", "currency"], "additionalProperties": false,
  "properties": {"amount_minor": {"type": "integer", "minimum": 1},
                 "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}`

// stop is an expected way for the story to stop: its text is the line to
// print.
type stop string

func (s stop) Error() string { return string(s) }

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, strings.Join(strings.Fields(whatToDo(err)), " "))
		os.Exit(1)
	}
	fmt.Println("ok: " + name)
}

// whatToDo is the one line for an error: the line of a stop, or the
// server's message and SQLSTATE and what to do about the usual causes.
func whatToDo(err error) string {
	var s stop
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	switch {
	case errors.As(err, &s):
		return string(s)
	case errors.As(err, &pgErr):
		line := fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		if pgErr.Detail != "" {
			line += ", DETAIL: " + pgErr.Detail
		}
		switch {
		case pgErr.Code == "42501" && (strings.Contains(pgErr.Message, "tools") || strings.Contains(pgErr.Message, "register_tool")):
			line += "; register_tool is the DBA's: set ADMIN_DATABASE_URL to a login member of convo_admin"
		case pgErr.Code == "3F000" || pgErr.Code == "42P01" && strings.Contains(pgErr.Message, "convo."):
			line += "; pgconvo is not installed there: run `go run ./cmd/migrate up` on that database"
		}
		return line
	case errors.As(err, &connErr):
		return fmt.Sprintf("cannot connect (%v): is the server of DATABASE_URL running? "+
			"(`go run ./cmd/migrate up` starts the local one and prints its URL)", err)
	}
	return err.Error()
}

// expect prints what a step got and stops the story unless it is want.
func expect(what string, got, want any) error {
	fmt.Printf("%s: %v\n", what, got)
	if !reflect.DeepEqual(got, want) {
		return stop(fmt.Sprintf("check failed: %s: got %v, want %v; the database does not behave as this "+
			"checkout's pgconvo does: migrate it with this checkout (`go run ./cmd/migrate up`) "+
			"and run the example again", what, got, want))
	}
	return nil
}

// inOwnerTx runs fn in a transaction that names its owner first, with SET
// LOCAL (set_config(..., true) is SET LOCAL that takes a parameter), and
// commits only if fn succeeds.
func inOwnerTx(ctx context.Context, db *pgx.Conn, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
			return err
		}
		return fn(tx)
	})
}

// nextStep is what the loop does for a (decision, state) pair it reads,
// also after a crash: the state first, the decision only says why. After
// confirm_effect the decision stays "confirm" while the state says
// "pending": a loop that switched on the decision would ask again.
func nextStep(e effect) string {
	switch {
	case e.Decision == "replay":
		return "run" // no effects: run the tool freely
	case e.State == "pending":
		return "send" // (again) under idempotency_key, then settle
	case e.State == "awaiting_confirmation":
		return "ask"
	case e.State == "failed" && e.Decision == "rejected":
		return "answer 422"
	case e.State == "failed":
		return "report failure"
	}
	return "report outcome" // applied, compensated: never send again
}

// processor is a fake payment processor: a repeated idempotency key gets
// the first charge back, which is what makes re-sending after a crash safe.
type processor struct {
	charges map[string]string
	sent    int
}

func (p *processor) charge(key string) string {
	p.sent++
	if _, ok := p.charges[key]; !ok {
		b := make([]byte, 4)
		rand.Read(b)
		p.charges[key] = "ch_" + hex.EncodeToString(b)
	}
	return p.charges[key]
}

func (p *processor) refund(chargeID string) string {
	return "re_" + strings.TrimPrefix(chargeID, "ch_")
}

// effect is a row of convo.effect_for_call.
type effect struct {
	ID, Decision, State, Key string
	ExternalRef              *string // NULL until settled
}

func effectFor(ctx context.Context, tx pgx.Tx, conv, call string) (e effect, err error) {
	err = tx.QueryRow(ctx, `SELECT effect_id, decision, state, idempotency_key, external_ref
	                          FROM convo.effect_for_call($1, $2)`, conv, call).
		Scan(&e.ID, &e.Decision, &e.State, &e.Key, &e.ExternalRef)
	return e, err
}

// jsonText is v as JSON text, for a jsonb parameter.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func text(s string) string { return jsonText([]map[string]any{{"type": "text", "text": s}}) }

func buy(id string, amountMinor int) string {
	return jsonText([]map[string]any{{"type": "tool_use", "id": id, "name": "purchase_credits",
		"input": map[string]any{"amount_minor": amountMinor, "currency": "EUR"}}})
}

func scalar[T any](ctx context.Context, tx pgx.Tx, sql string, args ...any) (v T, err error) {
	err = tx.QueryRow(ctx, sql, args...).Scan(&v)
	return v, err
}

func appendMessage(ctx context.Context, tx pgx.Tx, conv, role, parts string) (string, error) {
	return scalar[string](ctx, tx, `SELECT convo.append_message($1, $2, $3)`, conv, role, parts)
}

func edit(ctx context.Context, tx pgx.Tx, conv, message, s string) (string, error) {
	return scalar[string](ctx, tx, `SELECT convo.edit_and_resend($1, $2, $3)`, conv, message, text(s))
}

// register allowlists purchase_credits as README.md does, as the DBA
// (register_tool is convo_admin's), and returns its version. The same
// settings return the version registered; if the latest version has other
// settings, register_tool would make a new one: that is rolled back, and
// the story stops.
func register(ctx context.Context, admin *pgx.Conn) (version int, err error) {
	err = pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		registered, err := scalar[int](ctx, tx, `SELECT coalesce(max(version), 0) FROM convo.tools WHERE name = 'purchase_credits'`)
		if err != nil {
			return err
		}
		version, err = scalar[int](ctx, tx, `SELECT convo.register_tool('purchase_credits', true, $1,
		        p_idempotency_scope => 'fork_args', p_amount_arg => 'amount_minor', p_currency_arg => 'currency')`, schema)
		if err != nil {
			return err
		}
		if registered != 0 && version != registered {
			return stop(fmt.Sprintf("purchase_credits is registered with other settings (version %d); the example "+
				"expects the settings README.md registers (its first sql block): run it on a database "+
				"where purchase_credits is registered so, or not at all", registered))
		}
		return nil
	})
	return version, err
}

// connect opens a connection to url in pgx's exec mode, unless the URL sets
// default_query_exec_mode itself. pgx's default mode prepares each statement
// under a name (stmtcache_...) on the server connection and remembers it in
// this process only. Behind a pooler in transaction mode (PgBouncer before
// 1.21, as Debian 12 ships it) that server connection is shared with other
// clients and outlives the process, so the next run's prepare of the same
// name fails with 42P05 (prepared statement already exists), or another
// client finds a statement missing. Exec mode uses only the unnamed
// statement, in one round trip per query, so it works directly and through
// any pooler; it sends jsonb as JSON text, as this example does.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	// pgx.ParseConfig consumes default_query_exec_mode; pgconn's parse keeps
	// it among the runtime parameters, which tells whether the URL set it.
	if set, err := pgconn.ParseConfig(url); err == nil && set.RuntimeParams["default_query_exec_mode"] == "" {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	return pgx.ConnectConfig(ctx, cfg)
}

func run(ctx context.Context) error {
	appURL := os.Getenv("DATABASE_URL")
	if appURL == "" {
		return stop("DATABASE_URL is not set: export the URL `go run ./cmd/migrate up` printed")
	}
	adminURL := os.Getenv("ADMIN_DATABASE_URL")
	if adminURL == "" {
		adminURL = appURL
	}
	admin, err := connect(ctx, adminURL)
	if err != nil {
		return err
	}
	version, err := register(ctx, admin)
	admin.Close(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("purchase_credits: version %d\n", version)

	db, err := connect(ctx, appURL)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	pay := &processor{charges: map[string]string{}}

	// 1. The model calls the tool: appending the call writes its ledger row
	// in the same transaction. Read what to do, and commit before sending.
	var conv, ask string
	var p1 effect
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) (err error) {
		if conv, err = scalar[string](ctx, tx, `SELECT convo.create_conversation($1, $2)`, owner, "You sell credits."); err != nil {
			return err
		}
		if ask, err = appendMessage(ctx, tx, conv, "user", text("Buy me 500 credits, pleas")); err != nil {
			return err
		}
		if _, err = appendMessage(ctx, tx, conv, "assistant", buy("toolu_p1", 500)); err != nil {
			return err
		}
		p1, err = effectFor(ctx, tx, conv, "toolu_p1")
		return err
	}); err != nil {
		return err
	}
	if err := expect("toolu_p1", []string{p1.Decision, p1.State, nextStep(p1)}, []string{"execute", "pending", "send"}); err != nil {
		return err
	}
	if err := expect("its key is fork_args:<sha256>", regexp.MustCompile(`^fork_args:[0-9a-f]{64}$`).MatchString(p1.Key), true); err != nil {
		return err
	}

	// 2. Committed: send the charge under the key, then settle with the answer.
	ch1 := pay.charge(p1.Key)
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_http_status => 200,
		                                                   p_evidence => $4)`, conv, p1.ID, ch1, jsonText(map[string]string{"processor": "ok"})); err != nil {
			return err
		}
		_, err := appendMessage(ctx, tx, conv, "tool", jsonText([]map[string]any{{"type": "tool_result", "tool_use_id": "toolu_p1",
			"content": map[string]string{"charge": ch1}}}))
		return err
	}); err != nil {
		return err
	}

	// 3. The user fixes a typo; the model re-runs the purchase with the same
	// arguments: reuse, the same effect, already applied. Nothing is sent.
	var p2 effect
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) (err error) {
		if _, err = edit(ctx, tx, conv, ask, "Buy me 500 credits, please"); err != nil {
			return err
		}
		if _, err = appendMessage(ctx, tx, conv, "assistant", buy("toolu_p2", 500)); err != nil {
			return err
		}
		p2, err = effectFor(ctx, tx, conv, "toolu_p2")
		return err
	}); err != nil {
		return err
	}
	ref := ""
	if p2.ExternalRef != nil {
		ref = *p2.ExternalRef
	}
	if err := expect("toolu_p2", []string{p2.Decision, p2.State, ref, nextStep(p2)}, []string{"reuse", "applied", ch1, "report outcome"}); err != nil {
		return err
	}
	if err := expect("toolu_p2 is the same effect", p2.ID, p1.ID); err != nil {
		return err
	}

	// 4. A second edit asks for another amount: a re-run held for a person.
	var p3 effect
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) (err error) {
		if _, err = edit(ctx, tx, conv, ask, "Buy me 700 credits instead"); err != nil {
			return err
		}
		if _, err = appendMessage(ctx, tx, conv, "assistant", buy("toolu_p3", 700)); err != nil {
			return err
		}
		p3, err = effectFor(ctx, tx, conv, "toolu_p3")
		return err
	}); err != nil {
		return err
	}
	if err := expect("toolu_p3", []string{p3.Decision, p3.State, nextStep(p3)}, []string{"confirm", "awaiting_confirmation", "ask"}); err != nil {
		return err
	}

	// 5. The person confirms: the decision stays confirm, the state says send.
	var confirmed effect
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) (err error) {
		if _, err = tx.Exec(ctx, `SELECT convo.confirm_effect($1, $2, 'support:ana')`, conv, p3.ID); err != nil {
			return err
		}
		confirmed, err = effectFor(ctx, tx, conv, "toolu_p3")
		return err
	}); err != nil {
		return err
	}
	if err := expect("toolu_p3 confirmed", []string{confirmed.Decision, confirmed.State, nextStep(confirmed)}, []string{"confirm", "pending", "send"}); err != nil {
		return err
	}
	if err := expect("its key", confirmed.Key, "rerun:"+p3.ID+":of:"+p1.ID); err != nil {
		return err
	}
	ch2 := pay.charge(confirmed.Key)
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_http_status => 200)`, conv, p3.ID, ch2)
		return err
	}); err != nil {
		return err
	}
	if err := expect("charges sent", []int{pay.sent, len(pay.charges)}, []int{2, 2}); err != nil {
		return err
	}

	// 6. The first charge sits on no live branch: a reconciliation job finds
	// it, and the business refunds it.
	type orphan struct {
		EffectID, ExternalRef string
		AmountMinor           int64
		Currency              string
		ToolCallIDs           []string
	}
	orphaned := func(tx pgx.Tx) ([]orphan, error) {
		rows, _ := tx.Query(ctx, `SELECT effect_id, external_ref, amount_minor, currency, tool_call_ids
		                            FROM convo.orphaned_applied_effects WHERE conversation_id = $1`, conv)
		return pgx.CollectRows(rows, pgx.RowToStructByPos[orphan])
	}
	var orphans, left []orphan
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) (err error) {
		orphans, err = orphaned(tx)
		return err
	}); err != nil {
		return err
	}
	if err := expect("orphaned", orphans, []orphan{{p1.ID, ch1, 500, "EUR", []string{"toolu_p1", "toolu_p2"}}}); err != nil {
		return err
	}
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) (err error) {
		if _, err = tx.Exec(ctx, `SELECT convo.compensate_effect($1, $2, $3, $4)`, conv, p1.ID, pay.refund(ch1),
			jsonText(map[string]string{"reason": "customer changed the amount"})); err != nil {
			return err
		}
		left, err = orphaned(tx)
		return err
	}); err != nil {
		return err
	}
	if err := expect("orphaned after the refund", len(left), 0); err != nil {
		return err
	}

	// 7. How a CV error arrives: a *pgconn.PgError (errors.As), its Code the
	// SQLSTATE, its Detail the DETAIL (ids only). A compare-and-set append
	// on a moved head is CV001.
	var head string
	if err := inOwnerTx(ctx, db, func(tx pgx.Tx) (err error) {
		head, err = scalar[string](ctx, tx, `SELECT message_id FROM convo.path($1) ORDER BY depth DESC LIMIT 1`, conv)
		return err
	}); err != nil {
		return err
	}
	err = inOwnerTx(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', $2, p_expected_head => $3)`, conv, text("thanks"), ask)
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return stop(fmt.Sprintf("check failed: a stale expected head: want CV001, got %v", err))
	}
	if err := expect("CV001", []any{pgErr.Code, strings.Contains(pgErr.Detail, "current head "+head)}, []any{"CV001", true}); err != nil {
		return err
	}
	fmt.Printf("  %s\n  DETAIL: %s\n", pgErr.Message, pgErr.Detail)
	return nil
}
