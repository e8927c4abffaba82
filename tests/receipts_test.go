package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Receipts: a route-initiated mutation gets its row first (begin_receipt),
// its model-filled arguments checked against the tool version frozen at
// begin (fill_receipt), then exactly one outcome (apply_receipt in the
// mutation's own transaction, or fail_receipt). The first three tests are
// the seed article's pytest failure tests translated to SQL calls.

// followupSchema is the argument schema of the follow-up tool: what the
// model fills.
const followupSchema = `{"type": "object",
	"properties": {
		"ticket_id": {"type": "string", "minLength": 1},
		"summary": {"type": "string", "maxLength": 500},
		"assignee": {"type": "string"},
		"notes": {"type": "string", "maxLength": 500}},
	"required": ["ticket_id", "summary"],
	"additionalProperties": false}`

const (
	followupRequest = `{"ticket_id": "TCK-1008", "notes": "Customer still blocked on SSO."}`
	followupArgs    = `{"ticket_id": "TCK-1008", "summary": "SSO still blocked", "assignee": "ada"}`
	followupRoute   = `{"ticket_id": "TCK-1008"}` // what the route itself knows: p_expected
)

// newReceiptDB returns a fresh database with the follow-up tool registered
// (20-second deadline) and the application's own table, followups.
func newReceiptDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	db := newDB(t)
	registerTestTool(t, db, "file_followup", true, followupSchema)
	mustExec(t, db, `CREATE TABLE followups (id bigserial PRIMARY KEY, ticket_id text NOT NULL, notes text NOT NULL)`)
	return db
}

// postFollowup is the route handler of the seed article, in SQL calls:
// receipt first; a repeat answers from the receipt; otherwise fill the
// arguments, then insert the follow-up and apply the receipt in one
// transaction. It returns the HTTP status the route would answer and the
// receipt's result_ref.
func postFollowup(t testing.TB, db *pgxpool.Pool, owner, key, request, arguments, expected string) (int, string) {
	t.Helper()
	ctx := context.Background()
	r := beginReceipt(t, db, owner, key, "file_followup", request)
	if !r.Created && r.Status != "pending" {
		if r.Status == "applied" {
			return 200, r.ResultRef
		}
		return r.HTTPStatus, ""
	}
	if f := fillReceipt(t, db, r.ID, arguments, expected); f.Status != "pending" {
		return f.HTTPStatus, ""
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var ref string
	if err := tx.QueryRow(ctx, `INSERT INTO followups (ticket_id, notes) VALUES ($1::jsonb ->> 'ticket_id', $1::jsonb ->> 'notes')
		RETURNING 'followup:' || id`, request).Scan(&ref); err != nil {
		t.Fatalf("inserting the follow-up: %v", err)
	}
	if _, err := tx.Exec(ctx, `SELECT convo.apply_receipt($1, $2)`, r.ID, ref); err != nil {
		t.Fatalf("apply_receipt: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return 201, ref
}

// TestReceiptDuplicateKeyDoesNotFileTwice (seed test 1): the same key twice
// gives one receipt and one follow-up, and the repeat answers with the
// first result.
func TestReceiptDuplicateKeyDoesNotFileTwice(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)

	// The route, twice.
	status1, ref1 := postFollowup(t, db, "user-1", "follow-7f3a", followupRequest, followupArgs, followupRoute)
	status2, ref2 := postFollowup(t, db, "user-1", "follow-7f3a", followupRequest, followupArgs, followupRoute)
	requireEqual(t, "first status", status1, 201)
	requireEqual(t, "second status", status2, 200)
	requireEqual(t, "second result_ref", ref2, ref1)
	requireCount(t, db, 1, `SELECT count(*) FROM followups WHERE ticket_id = 'TCK-1008'`)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.tool_receipts WHERE idempotency_key = 'follow-7f3a'`)

	// The same, call by call: begin twice gives one receipt, created then not.
	first := beginReceipt(t, db, "user-1", "follow-8b4c", "file_followup", followupRequest)
	second := beginReceipt(t, db, "user-1", "follow-8b4c", "file_followup", followupRequest)
	requireEqual(t, "created (first)", first.Created, true)
	requireEqual(t, "created (repeat)", second.Created, false)
	requireEqual(t, "receipt id of the repeat", second.ID, first.ID)
	requireEqual(t, "status of a new receipt", first.Status, "pending")
	requireEqual(t, "status of the repeat", second.Status, "pending")
	if first.HTTPStatus != 0 || first.ErrorCode != "" || first.ResultRef != "" {
		t.Fatalf("a new receipt has a status, error or result: %+v", first)
	}
	requireEqual(t, "fill", fillReceipt(t, db, first.ID, followupArgs, followupRoute), fillAnswer{Status: "pending"})

	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var ref string
	if err := tx.QueryRow(ctx, `INSERT INTO followups (ticket_id, notes) VALUES ('TCK-2000', 'x') RETURNING 'followup:' || id`).Scan(&ref); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT convo.apply_receipt($1, $2)`, first.ID, ref); err != nil {
		t.Fatalf("apply_receipt: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	again := beginReceipt(t, db, "user-1", "follow-8b4c", "file_followup", followupRequest)
	requireEqual(t, "repeat after apply", again, receiptAnswer{ID: first.ID, Status: "applied", HTTPStatus: 201, ResultRef: ref})
	requireCount(t, db, 1, `SELECT count(*) FROM followups WHERE ticket_id = 'TCK-2000'`)
	stored := readReceipt(t, db, first.ID)
	if stored.Status != "applied" || stored.ResultRef != ref || stored.HTTPStatus != 201 || !stored.Settled ||
		stored.ArgumentsValid != "true" || stored.Arguments != queryRow[string](t, db, `SELECT $1::jsonb::text`, followupArgs) {
		t.Fatalf("applied receipt as stored: %+v", stored)
	}
}

// TestReceiptApplyIsAtomicWithTheMutation: apply_receipt runs in the
// caller's transaction: a rollback takes the follow-up and the applied
// state away together; a refused apply takes the caller's insert with it;
// and a duplicate that got past begin and fill concurrently cannot apply a
// second follow-up.
func TestReceiptApplyIsAtomicWithTheMutation(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	ctx := context.Background()
	insertAndApply := func(tx pgx.Tx, receipt, ticket string) (string, error) {
		var ref string
		if err := tx.QueryRow(ctx, `INSERT INTO followups (ticket_id, notes) VALUES ($1, 'n') RETURNING 'followup:' || id`, ticket).Scan(&ref); err != nil {
			return "", err
		}
		_, err := tx.Exec(ctx, `SELECT convo.apply_receipt($1, $2)`, receipt, ref)
		return ref, err
	}

	// Rolled back: neither the follow-up nor the applied state remains.
	r := beginReceipt(t, db, "user-1", "follow-rollback", "file_followup", followupRequest)
	fillReceipt(t, db, r.ID, followupArgs, followupRoute)
	filled := receiptRowVersion(t, db, r.ID)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := insertAndApply(tx, r.ID, "TCK-ROLLBACK"); err != nil {
		t.Fatalf("insert and apply: %v", err)
	}
	var inTx string
	if err := tx.QueryRow(ctx, `SELECT status FROM convo.tool_receipts WHERE id = $1`, r.ID).Scan(&inTx); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "status inside the transaction", inTx, "applied")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	requireCount(t, db, 0, `SELECT count(*) FROM followups WHERE ticket_id = 'TCK-ROLLBACK'`)
	requireEqual(t, "receipt after the rollback", receiptRowVersion(t, db, r.ID), filled)
	requireEqual(t, "repeat after the rollback", beginReceipt(t, db, "user-1", "follow-rollback", "file_followup", followupRequest),
		receiptAnswer{ID: r.ID, Status: "pending"})

	// The retry commits: exactly one follow-up.
	tx, err = db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := insertAndApply(tx, r.ID, "TCK-ROLLBACK")
	if err != nil {
		t.Fatalf("insert and apply: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	requireCount(t, db, 1, `SELECT count(*) FROM followups WHERE ticket_id = 'TCK-ROLLBACK'`)
	requireEqual(t, "result_ref", readReceipt(t, db, r.ID).ResultRef, ref)

	// A refused apply (the receipt failed meanwhile) aborts the caller's
	// transaction, insert included.
	failed := beginReceipt(t, db, "user-1", "follow-refused", "file_followup", followupRequest)
	mustExec(t, db, `SELECT convo.fail_receipt($1, 502, 'upstream_timeout')`, failed.ID)
	tx, err = db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = insertAndApply(tx, failed.ID, "TCK-REFUSED")
	requireSQLState(t, err, "CV006")
	_ = tx.Commit(ctx) // A failed transaction's COMMIT rolls back.
	requireCount(t, db, 0, `SELECT count(*) FROM followups WHERE ticket_id = 'TCK-REFUSED'`)

	// Two requests with the same key both got past begin and fill; the
	// second one's apply waits for the first transaction and is then
	// refused, so its follow-up goes too.
	dup := beginReceipt(t, db, "user-1", "follow-race", "file_followup", followupRequest)
	fillReceipt(t, db, dup.ID, followupArgs, followupRoute)
	dup2 := beginReceipt(t, db, "user-1", "follow-race", "file_followup", followupRequest)
	requireEqual(t, "second request's receipt", dup2, receiptAnswer{ID: dup.ID, Status: "pending"})
	requireEqual(t, "second request's fill (a repeat)", fillReceipt(t, db, dup2.ID, followupArgs, followupRoute), fillAnswer{Status: "pending"})
	tx1, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	if _, err := insertAndApply(tx1, dup.ID, "TCK-RACE"); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	conn2 := dedicatedConn(t, db)
	tx2, err := conn2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	var pid2 int32
	if err := tx2.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid2); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := insertAndApply(tx2, dup.ID, "TCK-RACE")
		done <- err
	}()
	waitForLock(t, db, uint32(pid2))
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		requireSQLState(t, err, "CV006")
	case <-time.After(10 * time.Second):
		t.Fatal("the second apply did not return after the first committed")
	}
	_ = tx2.Rollback(ctx)
	requireCount(t, db, 1, `SELECT count(*) FROM followups WHERE ticket_id = 'TCK-RACE'`)
}

// TestReceiptModelCannotRetargetTicket (seed test 2): arguments that name
// another ticket than the route's fail 422 arg_mismatch and are kept for the
// incident review; the schema is checked first (422 invalid_arguments).
func TestReceiptModelCannotRetargetTicket(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	const lying = `{"ticket_id": "TCK-EVIL", "summary": "nope", "assignee": "ada"}`
	request := `{"ticket_id": "TCK-1008", "notes": "please file this"}`

	status, _ := postFollowup(t, db, "user-1", "follow-retarget", request, lying, followupRoute)
	requireEqual(t, "route status", status, 422)
	r := beginReceipt(t, db, "user-1", "follow-retarget", "file_followup", request)
	requireEqual(t, "repeat", r, receiptAnswer{ID: r.ID, Status: "failed", HTTPStatus: 422, ErrorCode: "arg_mismatch"})
	stored := readReceipt(t, db, r.ID)
	if stored.Arguments != queryRow[string](t, db, `SELECT $1::jsonb::text`, lying) || stored.ArgumentsValid != "false" ||
		stored.Expected != queryRow[string](t, db, `SELECT $1::jsonb::text`, followupRoute) || !stored.Settled || !stored.Filled {
		t.Fatalf("a retargeting fill as stored: %+v", stored)
	}
	requireCount(t, db, 0, `SELECT count(*) FROM followups`)
	_, err := db.Exec(context.Background(), `SELECT convo.apply_receipt($1, 'followup:1')`, r.ID)
	requireSQLState(t, err, "CV006")

	cases := []struct {
		name, args, expected string
		want                 fillAnswer
	}{
		{"the route's ticket", followupArgs, followupRoute, fillAnswer{Status: "pending"}},
		{"another ticket", lying, followupRoute, fillAnswer{"failed", 422, "arg_mismatch"}},
		{"schema first: a null ticket", `{"summary": "x", "ticket_id": null}`, `{"summary": "x", "ticket_id": "TCK-1008"}`, fillAnswer{"failed", 422, "invalid_arguments"}},
		{"a second expected key that differs", followupArgs, `{"ticket_id": "TCK-1008", "assignee": "bob"}`, fillAnswer{"failed", 422, "arg_mismatch"}},
		{"an expected key the arguments lack", followupArgs, `{"ticket_id": "TCK-1008", "notes": "x"}`, fillAnswer{"failed", 422, "arg_mismatch"}},
		{"an expected value of another type", followupArgs, `{"ticket_id": ["TCK-1008"]}`, fillAnswer{"failed", 422, "arg_mismatch"}},
		{"every expected key matches", followupArgs, `{"ticket_id": "TCK-1008", "assignee": "ada", "summary": "SSO still blocked"}`, fillAnswer{Status: "pending"}},
		{"nothing expected", lying, `{}`, fillAnswer{Status: "pending"}},
		{"schema first: invalid and retargeted", `{"ticket_id": "TCK-EVIL", "summary": 5}`, followupRoute, fillAnswer{"failed", 422, "invalid_arguments"}},
		{"schema first: an extra argument", `{"ticket_id": "TCK-EVIL", "summary": "s", "priority": "high"}`, followupRoute, fillAnswer{"failed", 422, "invalid_arguments"}},
		{"schema first: not an object", `["TCK-1008"]`, followupRoute, fillAnswer{"failed", 422, "invalid_arguments"}},
	}
	for i, c := range cases {
		key := "retarget-case-" + string(rune('a'+i))
		r := beginReceipt(t, db, "user-2", key, "file_followup", request)
		if got := fillReceipt(t, db, r.ID, c.args, c.expected); got != c.want {
			t.Errorf("%s: fill_receipt(%s, %s) = %+v, want %+v", c.name, c.args, c.expected, got, c.want)
		}
		stored := readReceipt(t, db, r.ID)
		if stored.Status != c.want.Status || stored.HTTPStatus != c.want.HTTPStatus || stored.ErrorCode != c.want.ErrorCode ||
			stored.ArgumentsValid != map[bool]string{true: "true", false: "false"}[c.want.Status == "pending"] ||
			stored.Settled != (c.want.Status != "pending") || !stored.Filled {
			t.Errorf("%s: stored receipt %+v does not match the answer %+v", c.name, stored, c.want)
		}
	}
}

// TestReceiptDeadlines (seed test 3): a fill after the tool's deadline ends
// the receipt failed, 504 deadline_exceeded; expire_receipts fails every
// pending receipt past its deadline the same way, returns how many, and
// leaves the rest alone.
func TestReceiptDeadlines(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	mustExec(t, db, `SELECT convo.register_tool('slow_followup', true, $1, p_deadline => '200 milliseconds')`, followupSchema)
	mustExec(t, db, `SELECT convo.register_tool('hourly_followup', true, $1, p_deadline => '1 hour')`, followupSchema)

	late := beginReceipt(t, db, "user-1", "follow-timeout", "slow_followup", followupRequest)
	left := beginReceipt(t, db, "user-1", "follow-left-pending", "slow_followup", followupRequest)
	leftFilled := beginReceipt(t, db, "user-1", "follow-filled-pending", "hourly_followup", followupRequest)
	hourly := beginReceipt(t, db, "user-1", "follow-hourly", "hourly_followup", followupRequest)
	applied := beginReceipt(t, db, "user-1", "follow-applied", "file_followup", followupRequest)
	fillReceipt(t, db, applied.ID, followupArgs, followupRoute)
	mustExec(t, db, `SELECT convo.apply_receipt($1, 'followup:77')`, applied.ID)
	failed := beginReceipt(t, db, "user-1", "follow-failed", "slow_followup", followupRequest)
	mustExec(t, db, `SELECT convo.fail_receipt($1, 400, 'bad_request')`, failed.ID)
	fillReceipt(t, db, leftFilled.ID, followupArgs, followupRoute)

	var deadlineGap float64
	if err := db.QueryRow(context.Background(),
		`SELECT extract(epoch FROM deadline_at - created_at) FROM convo.tool_receipts WHERE id = $1`, late.ID).Scan(&deadlineGap); err != nil {
		t.Fatal(err)
	}
	if deadlineGap < 0.199 || deadlineGap > 0.201 {
		t.Fatalf("deadline of a 200 ms tool: %v seconds after created_at", deadlineGap)
	}

	mustExec(t, db, `SELECT pg_sleep(0.25)`)
	settledBefore := map[string]string{applied.ID: receiptRowVersion(t, db, applied.ID), failed.ID: receiptRowVersion(t, db, failed.ID)}

	// The late fill: a valid fill that arrives after the deadline.
	requireEqual(t, "late fill", fillReceipt(t, db, late.ID, followupArgs, followupRoute), fillAnswer{"failed", 504, "deadline_exceeded"})
	requireEqual(t, "repeat of the late one", beginReceipt(t, db, "user-1", "follow-timeout", "slow_followup", followupRequest),
		receiptAnswer{ID: late.ID, Status: "failed", HTTPStatus: 504, ErrorCode: "deadline_exceeded"})
	_, err := db.Exec(context.Background(), `SELECT convo.apply_receipt($1, 'followup:1')`, late.ID)
	requireSQLState(t, err, "CV006")

	// The sweeper: only the slow receipt that was left pending is past its deadline.
	requireEqual(t, "expire_receipts()", queryRow[int](t, db, `SELECT convo.expire_receipts()`), 1)
	got := readReceipt(t, db, left.ID)
	if got.Status != "failed" || got.HTTPStatus != 504 || got.ErrorCode != "deadline_exceeded" || !got.Settled {
		t.Fatalf("expired receipt: %+v", got)
	}
	for _, id := range []string{hourly.ID, leftFilled.ID} {
		requireEqual(t, "status of a receipt within its deadline", readReceipt(t, db, id).Status, "pending")
	}
	for id, before := range settledBefore {
		requireEqual(t, "a settled receipt after expire_receipts", receiptRowVersion(t, db, id), before)
	}
	requireEqual(t, "expire_receipts() again", queryRow[int](t, db, `SELECT convo.expire_receipts()`), 0)

	// An explicit p_now: before the deadlines nothing; two hours on, the
	// hourly receipts (filled or not), and nothing settled.
	requireEqual(t, "expire_receipts(now + 30 minutes)",
		queryRow[int](t, db, `SELECT convo.expire_receipts(clock_timestamp() + interval '30 minutes')`), 0)
	requireEqual(t, "expire_receipts(now + 2 hours)",
		queryRow[int](t, db, `SELECT convo.expire_receipts(clock_timestamp() + interval '2 hours')`), 2)
	for _, id := range []string{hourly.ID, leftFilled.ID} {
		got := readReceipt(t, db, id)
		if got.Status != "failed" || got.HTTPStatus != 504 || got.ErrorCode != "deadline_exceeded" {
			t.Fatalf("receipt %s expired with an explicit p_now: %+v", id, got)
		}
	}
	for id, before := range settledBefore {
		requireEqual(t, "a settled receipt after expire_receipts(p_now)", receiptRowVersion(t, db, id), before)
	}
	requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_receipts WHERE status = 'pending'`)
	requireCount(t, db, 0, `SELECT count(*) FROM followups`)
}

// TestReceiptIdempotencyConflicts: a key is unique per owner; the same key
// with another tool or another request raises CV009 and writes nothing.
// Requests compare in jsonb's canonical form: key order and whitespace do
// not matter, 500 and 500.0 differ.
func TestReceiptIdempotencyConflicts(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	registerTestTool(t, db, "search_tickets", false, `{"type": "object"}`)
	first := beginReceipt(t, db, "user-1", "order-0001", "file_followup", `{"b": 1, "a": 2, "amount": 500}`)

	requireEqual(t, "same request, keys in another order",
		beginReceipt(t, db, "user-1", "order-0001", "file_followup", `{"amount":500,"a":2,"b":1}`),
		receiptAnswer{ID: first.ID, Status: "pending"})
	requireEqual(t, "same request, other whitespace",
		beginReceipt(t, db, "user-1", "order-0001", "file_followup", "{\n\t\"a\" : 2 , \"b\":1,\"amount\":   500}"),
		receiptAnswer{ID: first.ID, Status: "pending"})

	const begin = `SELECT * FROM convo.begin_receipt($1, $2, $3, $4)`
	runCallCases(t, db, []callCase{
		{name: "another tool", sql: begin, args: []any{"user-1", "order-0001", "search_tickets", `{"b": 1, "a": 2, "amount": 500}`},
			code: "CV009", mentions: []string{first.ID, "order-0001"}},
		{name: "another request", sql: begin, args: []any{"user-1", "order-0001", "file_followup", `{"b": 1, "a": 3, "amount": 500}`},
			code: "CV009", mentions: []string{first.ID}},
		{name: "500.0 is not 500", sql: begin, args: []any{"user-1", "order-0001", "file_followup", `{"b": 1, "a": 2, "amount": 500.0}`}, code: "CV009"},
		{name: "an extra key", sql: begin, args: []any{"user-1", "order-0001", "file_followup", `{"b": 1, "a": 2, "amount": 500, "c": null}`}, code: "CV009"},
		{name: "the default request", sql: `SELECT * FROM convo.begin_receipt($1, $2, $3)`, args: []any{"user-1", "order-0001", "file_followup"}, code: "CV009"},
		{name: "an unregistered tool", sql: begin, args: []any{"user-1", "order-0001", "no_such_tool", `{"b": 1, "a": 2, "amount": 500}`}, code: "CV009"},
	})

	// Another owner's key is another receipt.
	other := beginReceipt(t, db, "user-2", "order-0001", "search_tickets", `{}`)
	if !other.Created || other.ID == first.ID {
		t.Fatalf("the same key for another owner: %+v (first %s)", other, first.ID)
	}

	// Settled receipts keep their key just as firmly.
	fillReceipt(t, db, first.ID, followupArgs, `{}`)
	mustExec(t, db, `SELECT convo.apply_receipt($1, 'followup:9')`, first.ID)
	runCallCases(t, db, []callCase{
		{name: "another request after apply", sql: begin, args: []any{"user-1", "order-0001", "file_followup", `{"b": 2}`}, code: "CV009"},
	})
	requireEqual(t, "repeat after apply", beginReceipt(t, db, "user-1", "order-0001", "file_followup", `{"a": 2, "b": 1, "amount": 500}`),
		receiptAnswer{ID: first.ID, Status: "applied", HTTPStatus: 201, ResultRef: "followup:9"})
	requireCount(t, db, 2, `SELECT count(*) FROM convo.tool_receipts`)
}

// TestReceiptBadArguments: NULLs, keys shorter than 8 or longer than 255
// characters and bad statuses raise CV011; an unregistered tool CV007; an
// unknown receipt CV002; a request, arguments or expected values over
// convo.max_request_bytes() and a result_ref or error code over
// convo.max_ref_length() CV010. None writes anything. The boundaries
// themselves are accepted.
func TestReceiptBadArguments(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	ctx := context.Background()
	maxBytes := queryRow[int](t, db, `SELECT convo.max_request_bytes()`)
	maxRef := queryRow[int](t, db, `SELECT convo.max_ref_length()`)
	overBuild := func(n int) string { return `{"ticket_id": "TCK-1008", "summary": "` + letters(n) + `"}` }
	over := sizedJSON(t, db, maxBytes+1, overBuild)
	atCap := sizedJSON(t, db, maxBytes, overBuild)

	pending := beginReceipt(t, db, "user-1", "follow-pending", "file_followup", followupRequest)
	filled := beginReceipt(t, db, "user-1", "follow-filled", "file_followup", followupRequest)
	fillReceipt(t, db, filled.ID, followupArgs, followupRoute)
	unknown := newID()

	const (
		begin  = `SELECT * FROM convo.begin_receipt($1, $2, $3, $4)`
		fill   = `SELECT * FROM convo.fill_receipt($1, $2, $3)`
		apply  = `SELECT convo.apply_receipt($1, $2, $3)`
		fail   = `SELECT convo.fail_receipt($1, $2, $3)`
		expire = `SELECT convo.expire_receipts($1)`
	)
	runCallCases(t, db, []callCase{
		{name: "begin: key of 7 characters", sql: begin, args: []any{"user-1", "1234567", "file_followup", `{}`}, code: "CV011"},
		{name: "begin: key of 7 two-byte characters", sql: begin, args: []any{"user-1", strings.Repeat("ü", 7), "file_followup", `{}`}, code: "CV011"},
		{name: "begin: key of 256 characters", sql: begin, args: []any{"user-1", strings.Repeat("k", 256), "file_followup", `{}`}, code: "CV011"},
		{name: "begin: empty key", sql: begin, args: []any{"user-1", "", "file_followup", `{}`}, code: "CV011"},
		{name: "begin: NULL key", sql: begin, args: []any{"user-1", nil, "file_followup", `{}`}, code: "CV011"},
		{name: "begin: NULL owner", sql: begin, args: []any{nil, "follow-x-123", "file_followup", `{}`}, code: "CV011"},
		{name: "begin: empty owner", sql: begin, args: []any{"", "follow-x-123", "file_followup", `{}`}, code: "CV011"},
		{name: "begin: NULL tool", sql: begin, args: []any{"user-1", "follow-x-123", nil, `{}`}, code: "CV011"},
		{name: "begin: NULL request", sql: begin, args: []any{"user-1", "follow-x-123", "file_followup", nil}, code: "CV011"},
		{name: "begin: unregistered tool", sql: begin, args: []any{"user-1", "follow-x-123", "delete_everything", `{}`}, code: "CV007",
			mentions: []string{"delete_everything"}},
		{name: "begin: request over the cap", sql: begin, args: []any{"user-1", "follow-x-123", "file_followup", over}, code: "CV010"},
		{name: "fill: unknown receipt", sql: fill, args: []any{unknown, followupArgs, `{}`}, code: "CV002", mentions: []string{unknown}},
		{name: "fill: NULL receipt", sql: fill, args: []any{nil, followupArgs, `{}`}, code: "CV011"},
		{name: "fill: NULL arguments", sql: fill, args: []any{pending.ID, nil, `{}`}, code: "CV011"},
		{name: "fill: NULL expected", sql: fill, args: []any{pending.ID, followupArgs, nil}, code: "CV011"},
		{name: "fill: expected not an object", sql: fill, args: []any{pending.ID, followupArgs, `["TCK-1008"]`}, code: "CV011"},
		{name: "fill: arguments over the cap", sql: fill, args: []any{pending.ID, over, `{}`}, code: "CV010"},
		{name: "fill: expected over the cap", sql: fill, args: []any{pending.ID, followupArgs, over}, code: "CV010"},
		{name: "apply: unknown receipt", sql: apply, args: []any{unknown, "followup:1", 201}, code: "CV002", mentions: []string{unknown}},
		{name: "apply: NULL receipt", sql: apply, args: []any{nil, "followup:1", 201}, code: "CV011"},
		{name: "apply: NULL result_ref", sql: apply, args: []any{filled.ID, nil, 201}, code: "CV011"},
		{name: "apply: empty result_ref", sql: apply, args: []any{filled.ID, "", 201}, code: "CV011"},
		{name: "apply: NULL status", sql: apply, args: []any{filled.ID, "followup:1", nil}, code: "CV011"},
		{name: "apply: status 500", sql: apply, args: []any{filled.ID, "followup:1", 500}, code: "CV011"},
		{name: "apply: status 302", sql: apply, args: []any{filled.ID, "followup:1", 302}, code: "CV011"},
		{name: "apply: result_ref over the cap", sql: apply, args: []any{filled.ID, strings.Repeat("r", maxRef+1), 201}, code: "CV010"},
		{name: "fail: unknown receipt", sql: fail, args: []any{unknown, 502, "upstream"}, code: "CV002"},
		{name: "fail: status 200", sql: fail, args: []any{pending.ID, 200, "upstream"}, code: "CV011"},
		{name: "fail: status 600", sql: fail, args: []any{pending.ID, 600, "upstream"}, code: "CV011"},
		{name: "fail: NULL status", sql: fail, args: []any{pending.ID, nil, "upstream"}, code: "CV011"},
		{name: "fail: NULL error code", sql: fail, args: []any{pending.ID, 502, nil}, code: "CV011"},
		{name: "fail: empty error code", sql: fail, args: []any{pending.ID, 502, ""}, code: "CV011"},
		{name: "fail: error code over the cap", sql: fail, args: []any{pending.ID, 502, strings.Repeat("e", maxRef+1)}, code: "CV010"},
		{name: "expire: NULL p_now", sql: expire, args: []any{nil}, code: "CV011"},
	})

	// The boundaries are accepted: keys of 8 and 255 characters (8 two-byte
	// characters too), a request and arguments of exactly the cap, a
	// result_ref of exactly max_ref_length characters.
	for _, key := range []string{"12345678", strings.Repeat("k", 255), strings.Repeat("ü", 8)} {
		if r := beginReceipt(t, db, "user-1", key, "file_followup", `{}`); !r.Created {
			t.Fatalf("key of %d characters: %+v", len([]rune(key)), r)
		}
	}
	atCapReceipt := beginReceipt(t, db, "user-1", "follow-at-cap", "file_followup", atCap)
	requireEqual(t, "fill at the cap", fillReceipt(t, db, atCapReceipt.ID, atCap, `{}`), fillAnswer{Status: "failed", HTTPStatus: 422, ErrorCode: "invalid_arguments"}) // summary > maxLength 500
	longRef := strings.Repeat("r", maxRef)
	if _, err := db.Exec(ctx, apply, filled.ID, longRef, 200); err != nil {
		t.Fatalf("apply with a result_ref of %d characters: %v", maxRef, err)
	}
	requireEqual(t, "stored result_ref length", len(readReceipt(t, db, filled.ID).ResultRef), maxRef)
}

// TestReceiptStateMachine: pending to applied (only with a valid fill) or
// failed, once. Exact repeats are no-ops that leave the row as it is; any
// other change of a settled or filled receipt raises CV006 and writes
// nothing.
func TestReceiptStateMachine(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	ctx := context.Background()
	const (
		fill  = `SELECT * FROM convo.fill_receipt($1, $2, $3)`
		apply = `SELECT convo.apply_receipt($1, $2, $3)`
		fail  = `SELECT convo.fail_receipt($1, $2, $3)`
	)
	unfilled := beginReceipt(t, db, "user-1", "state-unfilled", "file_followup", followupRequest)
	invalid := beginReceipt(t, db, "user-1", "state-invalid", "file_followup", followupRequest)
	requireEqual(t, "invalid fill", fillReceipt(t, db, invalid.ID, `{"ticket_id": "TCK-1008"}`, followupRoute),
		fillAnswer{"failed", 422, "invalid_arguments"})
	r := beginReceipt(t, db, "user-1", "state-main", "file_followup", followupRequest)
	requireEqual(t, "fill", fillReceipt(t, db, r.ID, followupArgs, followupRoute), fillAnswer{Status: "pending"})

	// A repeated fill answers again and touches nothing.
	v := receiptRowVersion(t, db, r.ID)
	requireEqual(t, "repeated fill", fillReceipt(t, db, r.ID, `{"assignee":"ada","summary":"SSO still blocked","ticket_id":"TCK-1008"}`, followupRoute),
		fillAnswer{Status: "pending"})
	requireEqual(t, "row after a repeated fill", receiptRowVersion(t, db, r.ID), v)

	runCallCases(t, db, []callCase{
		{name: "apply an unfilled receipt", sql: apply, args: []any{unfilled.ID, "followup:1", 201}, code: "CV006"},
		{name: "apply an invalidly filled receipt", sql: apply, args: []any{invalid.ID, "followup:1", 201}, code: "CV006"},
		{name: "fill twice with other arguments", sql: fill, args: []any{r.ID, `{"ticket_id": "TCK-1008", "summary": "other"}`, followupRoute}, code: "CV006"},
		{name: "fill twice with other expected values", sql: fill, args: []any{r.ID, followupArgs, `{}`}, code: "CV006"},
		{name: "refill an invalid fill", sql: fill, args: []any{invalid.ID, followupArgs, followupRoute}, code: "CV006"},
	})

	mustExec(t, db, apply, r.ID, "followup:1", 201)
	v = receiptRowVersion(t, db, r.ID)
	mustExec(t, db, apply, r.ID, "followup:1", 201)
	requireEqual(t, "row after a repeated apply", receiptRowVersion(t, db, r.ID), v)
	requireEqual(t, "fill repeated after apply", fillReceipt(t, db, r.ID, followupArgs, followupRoute), fillAnswer{Status: "applied", HTTPStatus: 201})
	requireEqual(t, "row after a fill repeated after apply", receiptRowVersion(t, db, r.ID), v)

	failed := beginReceipt(t, db, "user-1", "state-failed", "file_followup", followupRequest)
	mustExec(t, db, fail, failed.ID, 502, "upstream_timeout")
	fv := receiptRowVersion(t, db, failed.ID)
	mustExec(t, db, fail, failed.ID, 502, "upstream_timeout")
	requireEqual(t, "row after a repeated fail", receiptRowVersion(t, db, failed.ID), fv)
	mustExec(t, db, fail, invalid.ID, 422, "invalid_arguments") // the state fill_receipt left: an exact repeat
	runCallCases(t, db, []callCase{
		{name: "apply again with another result", sql: apply, args: []any{r.ID, "followup:2", 201}, code: "CV006"},
		{name: "apply again with another status", sql: apply, args: []any{r.ID, "followup:1", 200}, code: "CV006"},
		{name: "fail an applied receipt", sql: fail, args: []any{r.ID, 500, "oops"}, code: "CV006"},
		{name: "fill an applied receipt with other arguments", sql: fill, args: []any{r.ID, `{"ticket_id": "TCK-1008", "summary": "x"}`, followupRoute}, code: "CV006"},
		{name: "apply a failed receipt", sql: apply, args: []any{failed.ID, "followup:1", 201}, code: "CV006"},
		{name: "fail again with another code", sql: fail, args: []any{failed.ID, 502, "other"}, code: "CV006"},
		{name: "fail again with another status", sql: fail, args: []any{failed.ID, 504, "upstream_timeout"}, code: "CV006"},
		{name: "fill a failed receipt", sql: fill, args: []any{failed.ID, followupArgs, followupRoute}, code: "CV006"},
		{name: "fail an invalid fill with another code", sql: fail, args: []any{invalid.ID, 400, "bad"}, code: "CV006"},
	})

	// A validly filled receipt can still fail (the mutation was refused).
	refused := beginReceipt(t, db, "user-1", "state-refused", "file_followup", followupRequest)
	fillReceipt(t, db, refused.ID, followupArgs, followupRoute)
	mustExec(t, db, fail, refused.ID, 409, "conflict")
	got := readReceipt(t, db, refused.ID)
	if got.Status != "failed" || got.HTTPStatus != 409 || got.ErrorCode != "conflict" || got.ArgumentsValid != "true" {
		t.Fatalf("a refused mutation: %+v", got)
	}
	_, err := db.Exec(ctx, apply, refused.ID, "followup:3", 201)
	requireSQLState(t, err, "CV006")
}

// TestReceiptVersionFrozenAtBegin: a receipt is checked against the tool
// version that was latest at begin_receipt, whatever is registered before
// the fill; a receipt begun after the new version gets the new one.
func TestReceiptVersionFrozenAtBegin(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	strict := beginReceipt(t, db, "user-1", "frozen-v1-strict", "file_followup", followupRequest)
	lax := beginReceipt(t, db, "user-1", "frozen-v1-lax", "file_followup", followupRequest)

	// Version 2: summary may be long, and a priority is allowed; ticket_id
	// must look like TCK-<digits>.
	v2 := strings.NewReplacer(`"maxLength": 500}`, `"maxLength": 5000}`,
		`"assignee": {"type": "string"}`, `"assignee": {"type": "string"}, "priority": {"enum": ["low", "high"]}`,
		`"ticket_id": {"type": "string", "minLength": 1}`, `"ticket_id": {"type": "string", "pattern": "^TCK-[0-9]+$"}`).Replace(followupSchema)
	if v2 == followupSchema {
		t.Fatal("version 2 schema is the same as version 1")
	}
	requireEqual(t, "version 2", registerTestTool(t, db, "file_followup", true, v2), 2)

	newer := beginReceipt(t, db, "user-1", "frozen-v2", "file_followup", followupRequest)
	requireEqual(t, "version of a receipt begun before", readReceipt(t, db, strict.ID).ToolVersion, 1)
	requireEqual(t, "version of a receipt begun after", readReceipt(t, db, newer.ID).ToolVersion, 2)

	withPriority := `{"ticket_id": "TCK-1008", "summary": "s", "priority": "high"}`
	requireEqual(t, "v1 receipt, an argument only v2 allows", fillReceipt(t, db, strict.ID, withPriority, followupRoute),
		fillAnswer{"failed", 422, "invalid_arguments"})
	requireEqual(t, "v2 receipt, the same arguments", fillReceipt(t, db, newer.ID, withPriority, followupRoute), fillAnswer{Status: "pending"})

	oddTicket := `{"ticket_id": "ticket 1008", "summary": "s"}`
	requireEqual(t, "v1 receipt, an argument only v1 allows", fillReceipt(t, db, lax.ID, oddTicket, `{}`), fillAnswer{Status: "pending"})
	v2Check := beginReceipt(t, db, "user-1", "frozen-v2-odd", "file_followup", followupRequest)
	requireEqual(t, "v2 receipt, the same arguments", fillReceipt(t, db, v2Check.ID, oddTicket, `{}`),
		fillAnswer{"failed", 422, "invalid_arguments"})
	// A repeat of begin_receipt does not move a receipt to the new version.
	beginReceipt(t, db, "user-1", "frozen-v1-strict", "file_followup", followupRequest)
	requireEqual(t, "version after a repeated begin", readReceipt(t, db, strict.ID).ToolVersion, 1)
}

// TestReceiptDirectChanges: statements outside the API cannot break the
// state machine: a settled receipt never changes, a pending one keeps its
// identity and its fill (CV006); receipts are never deleted (CV005); and the
// table's CHECKs refuse rows whose columns contradict their status.
func TestReceiptDirectChanges(t *testing.T) {
	t.Parallel()
	db := newReceiptDB(t)
	applied := beginReceipt(t, db, "user-1", "direct-applied", "file_followup", followupRequest)
	fillReceipt(t, db, applied.ID, followupArgs, followupRoute)
	mustExec(t, db, `SELECT convo.apply_receipt($1, 'followup:1')`, applied.ID)
	failed := beginReceipt(t, db, "user-1", "direct-failed", "file_followup", followupRequest)
	mustExec(t, db, `SELECT convo.fail_receipt($1, 502, 'upstream')`, failed.ID)
	pending := beginReceipt(t, db, "user-1", "direct-pending", "file_followup", followupRequest)
	filled := beginReceipt(t, db, "user-1", "direct-filled", "file_followup", followupRequest)
	fillReceipt(t, db, filled.ID, followupArgs, followupRoute)

	const upd = `UPDATE convo.tool_receipts SET `
	runCallCases(t, db, []callCase{
		{name: "applied back to pending", code: "CV006", args: []any{applied.ID},
			sql: upd + `status = 'pending', http_status = NULL, result_ref = NULL, settled_at = NULL WHERE id = $1`},
		{name: "applied to failed", code: "CV006", args: []any{applied.ID},
			sql: upd + `status = 'failed', http_status = 500, error_code = 'x', result_ref = NULL WHERE id = $1`},
		{name: "another result_ref on an applied receipt", code: "CV006", args: []any{applied.ID},
			sql: upd + `result_ref = 'followup:2' WHERE id = $1`},
		{name: "failed to applied", code: "CV006", args: []any{failed.ID},
			sql: upd + `status = 'applied', http_status = 201, error_code = NULL, result_ref = 'r', arguments = '{}', expected = '{}', arguments_valid = true, filled_at = now() WHERE id = $1`},
		{name: "another request", code: "CV006", args: []any{pending.ID}, sql: upd + `request = '{"ticket_id": "TCK-EVIL"}' WHERE id = $1`},
		{name: "another digest", code: "CV006", args: []any{pending.ID}, sql: upd + `request_digest = 'x' WHERE id = $1`},
		{name: "another key", code: "CV006", args: []any{pending.ID}, sql: upd + `idempotency_key = 'direct-other' WHERE id = $1`},
		{name: "another owner", code: "CV006", args: []any{pending.ID}, sql: upd + `owner_id = 'user-2' WHERE id = $1`},
		{name: "another tool version", code: "CV006", args: []any{pending.ID}, sql: upd + `tool_version = 2 WHERE id = $1`},
		{name: "a later deadline", code: "CV006", args: []any{pending.ID}, sql: upd + `deadline_at = deadline_at + interval '1 hour' WHERE id = $1`},
		{name: "refill arguments", code: "CV006", args: []any{filled.ID}, sql: upd + `arguments = '{"ticket_id": "TCK-EVIL", "summary": "s"}' WHERE id = $1`},
		{name: "unfill", code: "CV006", args: []any{filled.ID}, sql: upd + `arguments = NULL, expected = NULL, arguments_valid = NULL, filled_at = NULL WHERE id = $1`},
		{name: "mark arguments that fail the schema valid", code: "CV006", args: []any{pending.ID},
			sql: upd + `arguments = '{"ticket_id": 1008}', expected = '{}', arguments_valid = true, filled_at = now() WHERE id = $1`},
		// No arguments at all are invalid arguments (args_errors refuses SQL NULL with CV011).
		{name: "mark missing arguments valid", code: "CV006", args: []any{pending.ID},
			sql: upd + `arguments_valid = true, filled_at = now() WHERE id = $1`},
		{name: "mark a retargeted ticket valid", code: "CV006", args: []any{pending.ID},
			sql: upd + `arguments = '{"ticket_id": "TCK-EVIL", "summary": "s"}', expected = '{"ticket_id": "TCK-1008"}', arguments_valid = true, filled_at = now() WHERE id = $1`},
		{name: "every receipt, one statement", code: "CV006", sql: upd + `created_at = created_at - interval '1 day'`},
		{name: "DELETE one", code: "CV005", args: []any{pending.ID}, sql: `DELETE FROM convo.tool_receipts WHERE id = $1`},
		{name: "DELETE all", code: "CV005", sql: `DELETE FROM convo.tool_receipts`},
		{name: "TRUNCATE", code: "CV005", sql: `TRUNCATE convo.tool_receipts`},
		{name: "INSERT applied", code: "CV006",
			sql: `INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest, deadline_at,
			        arguments, expected, arguments_valid, filled_at, status, http_status, result_ref, settled_at)
			      VALUES (gen_random_uuid(), 'user-1', 'direct-insert', 'file_followup', 1, '{}', 'd', now() + interval '1 hour',
			        '{}', '{}', true, now(), 'applied', 201, 'r', now())`},
		{name: "INSERT filled", code: "CV006",
			sql: `INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest, deadline_at,
			        arguments, expected, arguments_valid, filled_at)
			      VALUES (gen_random_uuid(), 'user-1', 'direct-insert', 'file_followup', 1, '{}', 'd', now() + interval '1 hour',
			        '{}', '{}', true, now())`},
	})

	// Updates the trigger lets through as transitions, that contradict the
	// CHECKs tying columns to the status.
	for _, c := range []struct{ name, id, set string }{
		{"failed without an error code", pending.ID, `status = 'failed', http_status = 500, settled_at = now()`},
		{"failed without a status", pending.ID, `status = 'failed', error_code = 'x', settled_at = now()`},
		{"failed without settled_at", pending.ID, `status = 'failed', http_status = 500, error_code = 'x'`},
		{"pending with a status", pending.ID, `http_status = 200`},
		{"applied without a result_ref", filled.ID, `status = 'applied', http_status = 201, settled_at = now()`},
		{"applied with an error code", filled.ID, `status = 'applied', http_status = 201, result_ref = 'r', error_code = 'x', settled_at = now()`},
		{"filled without filled_at", pending.ID, `arguments = '{}', arguments_valid = true`},
		{"filled without arguments_valid", pending.ID, `arguments = '{}', filled_at = now()`},
		{"applied with invalid arguments", pending.ID,
			`arguments = '{}', arguments_valid = false, filled_at = now(), status = 'applied', http_status = 201, result_ref = 'r', settled_at = now()`},
		{"applied without any fill", pending.ID, `status = 'applied', http_status = 201, result_ref = 'r', settled_at = now()`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := readAPIState(t, db)
			_, err := db.Exec(context.Background(), upd+c.set+` WHERE id = $1`, c.id)
			requireSQLStateIn(t, err, "23514", "CV006")
			requireAPIUnchanged(t, db, before)
		})
	}
}
