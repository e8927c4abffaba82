package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Helpers for the schema-validator, tool-registry, receipt and generation
// tests (schema_validator_test.go, tools_test.go, receipts_test.go,
// generations_test.go). Ids travel as text, as in tree_helpers_test.go.

// apiState is what a failed call must leave alone: the tree (snapshotCounts)
// and every row version (xmin, ctid and content) of the tool registry,
// receipts and generations.
type apiState struct {
	Tree                         tableCounts
	Tools, Receipts, Generations string
}

// readAPIState reads apiState.
func readAPIState(t testing.TB, db *pgxpool.Pool) apiState {
	t.Helper()
	s := apiState{Tree: snapshotCounts(t, db)}
	err := db.QueryRow(context.Background(), `
		SELECT (SELECT coalesce(string_agg(xmin::text || ctid::text || to_jsonb(t)::text, E'\n' ORDER BY name, version), '')
		          FROM convo.tools t),
		       (SELECT coalesce(string_agg(xmin::text || ctid::text || to_jsonb(r)::text, E'\n' ORDER BY id), '')
		          FROM convo.tool_receipts r),
		       (SELECT coalesce(string_agg(xmin::text || ctid::text || to_jsonb(g)::text, E'\n' ORDER BY conversation_id, id), '')
		          FROM convo.generations g)`).
		Scan(&s.Tools, &s.Receipts, &s.Generations)
	if err != nil {
		t.Fatalf("reading the registry, receipts and generations: %v", err)
	}
	return s
}

// requireAPIUnchanged fails if anything in apiState differs from before.
func requireAPIUnchanged(t testing.TB, db *pgxpool.Pool, before apiState) {
	t.Helper()
	after := readAPIState(t, db)
	if after.Tree != before.Tree {
		t.Fatalf("the call wrote to the tree:\n before %+v\n after  %+v", before.Tree, after.Tree)
	}
	for _, c := range []struct{ what, before, after string }{
		{"convo.tools", before.Tools, after.Tools},
		{"convo.tool_receipts", before.Receipts, after.Receipts},
		{"convo.generations", before.Generations, after.Generations},
	} {
		if c.before != c.after {
			t.Fatalf("the call wrote to %s:\n before %s\n after  %s", c.what, c.before, c.after)
		}
	}
}

// callCase is one call that must fail with SQLSTATE code and write nothing;
// when mentions is set, the error's message and DETAIL together must name
// each of its strings.
type callCase struct {
	name     string
	sql      string
	args     []any
	code     string
	mentions []string
}

// runCallCases runs each case in autocommit, as a subtest, and checks its
// SQLSTATE, what it names, and that it wrote nothing (requireAPIUnchanged).
func runCallCases(t *testing.T, db *pgxpool.Pool, cases []callCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := readAPIState(t, db)
			_, err := db.Exec(context.Background(), c.sql, c.args...)
			requireSQLState(t, err, c.code)
			if len(c.mentions) > 0 {
				e := pgError(t, err)
				text := e.Message + "\n" + e.Detail
				for _, m := range c.mentions {
					if !strings.Contains(text, m) {
						t.Errorf("error %q (DETAIL %q) does not name %q", e.Message, e.Detail, m)
					}
				}
			}
			requireAPIUnchanged(t, db, before)
		})
	}
}

// registerTestTool calls convo.register_tool with the default scope and
// deadline and returns the version.
func registerTestTool(t testing.TB, db *pgxpool.Pool, name string, effectful bool, schema string) int {
	t.Helper()
	return queryRow[int](t, db, `SELECT convo.register_tool($1, $2, $3)`, name, effectful, schema)
}

// receiptAnswer is one row of convo.begin_receipt; "" stands for NULL text
// and 0 for a NULL status.
type receiptAnswer struct {
	ID, Status, ErrorCode, ResultRef string
	HTTPStatus                       int
	Created                          bool
}

const beginReceiptSQL = `SELECT receipt_id::text, status, coalesce(http_status, 0), coalesce(error_code, ''),
	coalesce(result_ref, ''), created FROM convo.begin_receipt($1, $2, $3, $4)`

// queryer is a pool or a transaction.
type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// beginReceiptOn calls convo.begin_receipt on q and returns its answer or error.
func beginReceiptOn(q queryer, owner, key, tool, request string) (receiptAnswer, error) {
	var a receiptAnswer
	err := q.QueryRow(context.Background(), beginReceiptSQL, owner, key, tool, request).
		Scan(&a.ID, &a.Status, &a.HTTPStatus, &a.ErrorCode, &a.ResultRef, &a.Created)
	return a, err
}

// beginReceipt calls convo.begin_receipt and fails the test on error.
func beginReceipt(t testing.TB, db *pgxpool.Pool, owner, key, tool, request string) receiptAnswer {
	t.Helper()
	a, err := beginReceiptOn(db, owner, key, tool, request)
	if err != nil {
		t.Fatalf("begin_receipt(%s, %s, %s, %s): %v", owner, key, tool, request, err)
	}
	return a
}

// fillAnswer is the row convo.fill_receipt returns; 0 and "" stand for NULL.
type fillAnswer struct {
	Status     string
	HTTPStatus int
	ErrorCode  string
}

// fillReceipt calls convo.fill_receipt and fails the test on error.
func fillReceipt(t testing.TB, db *pgxpool.Pool, receipt, arguments, expected string) fillAnswer {
	t.Helper()
	var a fillAnswer
	err := db.QueryRow(context.Background(), `
		SELECT status, coalesce(http_status, 0), coalesce(error_code, '')
		  FROM convo.fill_receipt($1, $2, $3)`, receipt, arguments, expected).
		Scan(&a.Status, &a.HTTPStatus, &a.ErrorCode)
	if err != nil {
		t.Fatalf("fill_receipt(%s, %s, %s): %v", receipt, arguments, expected, err)
	}
	return a
}

// storedReceipt is a receipt row as stored; "" and 0 stand for NULL.
type storedReceipt struct {
	Status, ErrorCode, ResultRef, Arguments, Expected string
	HTTPStatus, ToolVersion                           int
	ArgumentsValid                                    string // "true", "false" or ""
	Settled, Filled                                   bool
}

// readReceipt reads a receipt row.
func readReceipt(t testing.TB, db *pgxpool.Pool, id string) storedReceipt {
	t.Helper()
	var r storedReceipt
	err := db.QueryRow(context.Background(), `
		SELECT status, coalesce(error_code, ''), coalesce(result_ref, ''), coalesce(arguments::text, ''),
		       coalesce(expected::text, ''), coalesce(http_status, 0), tool_version,
		       coalesce(arguments_valid::text, ''), settled_at IS NOT NULL, filled_at IS NOT NULL
		  FROM convo.tool_receipts WHERE id = $1`, id).
		Scan(&r.Status, &r.ErrorCode, &r.ResultRef, &r.Arguments, &r.Expected, &r.HTTPStatus, &r.ToolVersion,
			&r.ArgumentsValid, &r.Settled, &r.Filled)
	if err != nil {
		t.Fatalf("reading receipt %s: %v", id, err)
	}
	return r
}

// receiptRowVersion returns a receipt's xmin, ctid and content, which an
// exact repeat must leave as they are.
func receiptRowVersion(t testing.TB, db *pgxpool.Pool, id string) string {
	t.Helper()
	return queryRow[string](t, db,
		`SELECT xmin::text || ' ' || ctid::text || ' ' || to_jsonb(r)::text FROM convo.tool_receipts r WHERE id = $1`, id)
}

// generationRow is a generation as stored; "" stands for NULL.
type generationRow struct {
	State, MessageID, HeadAtBegin, Usage, FinishReason, ErrorCode, Error string
	Finished                                                             bool
}

// readGeneration reads a generation row.
func readGeneration(t testing.TB, db *pgxpool.Pool, conv, gen string) generationRow {
	t.Helper()
	var g generationRow
	err := db.QueryRow(context.Background(), `
		SELECT state, coalesce(message_id::text, ''), coalesce(head_at_begin::text, ''), coalesce(usage::text, ''),
		       coalesce(finish_reason, ''), coalesce(error_code, ''), coalesce(error::text, ''), finished_at IS NOT NULL
		  FROM convo.generations WHERE conversation_id = $1 AND id = $2`, conv, gen).
		Scan(&g.State, &g.MessageID, &g.HeadAtBegin, &g.Usage, &g.FinishReason, &g.ErrorCode, &g.Error, &g.Finished)
	if err != nil {
		t.Fatalf("reading generation %s: %v", gen, err)
	}
	return g
}

// beginGeneration calls convo.begin_generation with default params and
// returns the generation id.
func beginGeneration(t testing.TB, db *pgxpool.Pool, conv, prompt, model string) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT convo.begin_generation($1, $2, $3)::text`, conv, prompt, model)
}

// completeGeneration calls convo.complete_generation with default usage
// and returns the assistant message id.
func completeGeneration(t testing.TB, db *pgxpool.Pool, conv, gen, parts string) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT convo.complete_generation($1, $2, $3)::text`, conv, gen, parts)
}

// messageInfo is a message's place in the tree; "" stands for NULL.
type messageInfo struct {
	ParentID, Role, BranchReason, Parts string
}

// readMessage reads a message's parent, role, branch reason and parts.
func readMessage(t testing.TB, db *pgxpool.Pool, conv, msg string) messageInfo {
	t.Helper()
	var m messageInfo
	err := db.QueryRow(context.Background(), `
		SELECT coalesce(parent_id::text, ''), role, coalesce(branch_reason, ''), parts::text
		  FROM convo.messages WHERE conversation_id = $1 AND id = $2`, conv, msg).
		Scan(&m.ParentID, &m.Role, &m.BranchReason, &m.Parts)
	if err != nil {
		t.Fatalf("reading message %s: %v", msg, err)
	}
	return m
}

// requireSQLStateIn fails the test unless err is a PostgreSQL error with
// one of codes.
func requireSQLStateIn(t testing.TB, err error, codes ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want SQLSTATE %s, got no error", strings.Join(codes, " or "))
	}
	got := sqlState(err)
	for _, c := range codes {
		if got == c {
			return
		}
	}
	t.Fatalf("want SQLSTATE %s, got %q: %v", strings.Join(codes, " or "), got, err)
}
