package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of the argument schemas' rules as tools and receipts see them: boolean
// schemas and an empty enum, SQL NULL in args_errors, the 64-level nesting
// cap on schemas and on the values checked against them, and the length cap
// on tool call ids.

// nestingCapError is args_errors's one error for a value nested deeper
// than the cap.
const nestingCapError = "$: nesting: deeper than 64 levels of arrays and objects"

// nestedArrays returns levels arrays, one inside the other, around inner
// ("" for none): nestedArrays(2, "1") is [[1]].
func nestedArrays(levels int, inner string) string {
	return strings.Repeat("[", levels) + inner + strings.Repeat("]", levels)
}

// nestedObjects returns levels objects, each the value of key "a" of the
// one around it, around inner: nestedObjects(2, "1") is {"a": {"a": 1}}.
func nestedObjects(levels int, inner string) string {
	return strings.Repeat(`{"a": `, levels) + inner + strings.Repeat("}", levels)
}

// nestedItemsSchema returns a schema whose items are nested levels deep,
// ending in leaf: levels+1 levels of JSON objects.
func nestedItemsSchema(levels int, leaf string) string {
	return strings.Repeat(`{"items": `, levels) + leaf + strings.Repeat("}", levels)
}

// nestedPropertiesSchema returns a schema whose property a is nested levels
// deep (two JSON levels each), ending in leaf.
func nestedPropertiesSchema(levels int, leaf string) string {
	return strings.Repeat(`{"properties": {"a": `, levels) + leaf + strings.Repeat("}}", levels)
}

// TestBooleanSchemasAsTools: true and false register as a tool's schema (at
// the root, as items and as property values) and decide its calls: true
// executes anything, false rejects everything with its error in the
// evidence; an empty enum rejects every value too. Receipts validate the
// same way.
func TestBooleanSchemasAsTools(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	requireEqual(t, "version of a true tool", registerTestTool(t, db, "anything", true, `true`), 1)
	requireEqual(t, "version of a false tool", registerTestTool(t, db, "nothing", true, `false`), 1)
	requireEqual(t, "the same false again", registerTestTool(t, db, "nothing", true, `false`), 1)
	requireEqual(t, "false after an object is a new version", registerTestTool(t, db, "anything", true, `{}`), 2)
	requireEqual(t, "back to true", registerTestTool(t, db, "anything", true, `true`), 3)
	registerTestTool(t, db, "never", true, `{"type": "object", "properties": {"mode": {"enum": []}, "x": false, "y": true}}`)
	requireCount(t, db, 3, `SELECT count(*) FROM convo.tools WHERE jsonb_typeof(args_schema) = 'boolean'`)

	conv := createConversation(t, db, "owner-1", "You call tools.")
	appendMsg(t, db, conv, "user", textParts("Go."))
	appendMsg(t, db, conv, "assistant", effToolUses(
		effCall{"c_any", "anything", `{"a": [1, {"b": null}]}`},
		effCall{"c_none", "nothing", `{}`},
		effCall{"c_never_ok", "never", `{"y": [1]}`},
		effCall{"c_never_enum", "never", `{"mode": "fast"}`},
		effCall{"c_never_false", "never", `{"x": null}`}))
	wantErrors := map[string][]string{
		"c_any":         nil,
		"c_none":        {"$: false: no value is allowed"},
		"c_never_ok":    nil,
		"c_never_enum":  {"$.mode: enum: must be one of []"},
		"c_never_false": {"$.x: false: no value is allowed"},
	}
	for call, want := range wantErrors {
		d := effForCall(t, db, conv, call)
		if want == nil {
			requireEqual(t, call+" decision", [2]string{d.Decision, d.State}, [2]string{"execute", "pending"})
			continue
		}
		requireEqual(t, call+" decision", [3]string{d.Decision, d.State, d.ErrorCode}, [3]string{"rejected", "failed", "invalid_arguments"})
		requireSlice(t, call+" evidence", effectEvidenceErrors(t, db, conv, d.EffectID), want)
	}

	// Receipts check the tool version frozen at begin_receipt the same way.
	r := beginReceipt(t, db, "owner-1", "receipt-true-1", "anything", `{}`)
	requireEqual(t, "a true tool's receipt", fillReceipt(t, db, r.ID, `{"whatever": [1]}`, `{}`), fillAnswer{Status: "pending"})
	r = beginReceipt(t, db, "owner-1", "receipt-false-1", "nothing", `{}`)
	requireEqual(t, "a false tool's receipt", fillReceipt(t, db, r.ID, `{}`, `{}`),
		fillAnswer{Status: "failed", HTTPStatus: 422, ErrorCode: "invalid_arguments"})

	// A boolean schema has no properties, so no amount or currency argument.
	runCallCases(t, db, []callCase{{
		name: "amount argument of a true schema",
		sql:  `SELECT convo.register_tool('pay_anything', true, 'true', p_amount_arg => 'amount_minor')`,
		code: "CV011",
	}})
}

// effectEvidenceErrors returns the errors listed in the evidence of an
// effect's first event (a rejected call's schema errors).
func effectEvidenceErrors(t testing.TB, db *pgxpool.Pool, conv, effect string) []string {
	t.Helper()
	evidence := queryRow[string](t, db, `SELECT evidence::text FROM convo.tool_effect_events
		WHERE conversation_id = $1 AND effect_id = $2 ORDER BY seq LIMIT 1`, conv, effect)
	var e struct{ Errors []string }
	if err := json.Unmarshal([]byte(evidence), &e); err != nil {
		t.Fatalf("evidence %s: %v", evidence, err)
	}
	return e.Errors
}

// TestArgsErrorsRefusesSQLNull: SQL NULL for the schema, the value or the
// path is no JSON value and raises CV011 (JSON null is 'null'::jsonb, a
// value like any other); nothing is written.
func TestArgsErrorsRefusesSQLNull(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	runCallCases(t, db, []callCase{
		{name: "NULL schema", sql: `SELECT convo.args_errors(NULL, '{}')`, code: "CV011", mentions: []string{"p_schema"}},
		{name: "NULL value", sql: `SELECT convo.args_errors('{}', NULL)`, code: "CV011", mentions: []string{"p_value"}},
		{name: "NULL value with the schema true", sql: `SELECT convo.args_errors('true', NULL)`, code: "CV011"},
		{name: "both NULL", sql: `SELECT convo.args_errors(NULL, NULL)`, code: "CV011"},
		{name: "NULL path", sql: `SELECT convo.args_errors('{}', '{}', NULL)`, code: "CV011", mentions: []string{"p_path"}},
		{name: "NULL as a typed parameter", sql: `SELECT convo.args_errors($1::jsonb, $2::jsonb)`, args: []any{nil, `{}`}, code: "CV011"},
	})
	requireSlice(t, "JSON null against false", queryRow[[]string](t, db, `SELECT convo.args_errors('false', 'null')`),
		[]string{"$: false: no value is allowed"})
	requireSlice(t, "JSON null against true", queryRow[[]string](t, db, `SELECT convo.args_errors('true', 'null')`), []string{})
}

// TestSchemaNestingCap: a schema nested deeper than 64 levels of arrays and
// objects (const, enum, default and examples values included) is refused at
// registration with CV011, naming the cap, and writes nothing; 64 levels are
// accepted. Measured without recursion, so 600 or 9000 levels answer CV011
// as quickly, never 54001 (stack depth).
func TestSchemaNestingCap(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const register = `SELECT convo.register_tool('deep_tool', true, $1)`
	deep := func(name, schema string) callCase {
		return callCase{name: name, sql: register, args: []any{schema}, code: "CV011", mentions: []string{"64 levels"}}
	}
	before := fingerprint(t, db)
	runCallCases(t, db, []callCase{
		deep("600 levels of items", nestedItemsSchema(599, `{}`)),
		deep("600 levels of properties", nestedPropertiesSchema(300, `{}`)),
		deep("9000 levels of items", nestedItemsSchema(8999, `{}`)),
		deep("65 levels of items", nestedItemsSchema(64, `{}`)),
		deep("a deep const", `{"const": `+nestedArrays(64, "")+`}`),
		deep("a deep default", `{"type": "object", "default": `+nestedObjects(64, "1")+`}`),
		deep("600 levels, the innermost a bad keyword", nestedItemsSchema(599, `{"oneOf": []}`)),
	})
	requireFingerprint(t, db, "refused deep schemas", before)

	requireEqual(t, "64 levels of items", registerTestTool(t, db, "deep_64", true, nestedItemsSchema(63, `{}`)), 1)
	requireEqual(t, "64 levels of properties ending in true", registerTestTool(t, db, "deep_props", true,
		nestedPropertiesSchema(31, `{"type": "object"}`)), 1)
	requireEqual(t, "a const of 63 levels", registerTestTool(t, db, "deep_const", true, `{"const": `+nestedArrays(63, "")+`}`), 1)
}

// TestValueNestingCap: a value nested deeper than 64 levels fails
// args_errors with one error naming the cap, whatever the schema; so a tool
// call with such an input is stored and rejected, the error in its
// evidence, and a receipt with such arguments fails 422; never 54001. This
// holds against a deep schema stored before the cap existed too.
func TestValueNestingCap(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, c := range []struct {
		name, schema, value string
		want                []string
	}{
		{"64 levels against {}", `{}`, nestedArrays(64, ""), []string{}},
		{"65 levels against {}", `{}`, nestedArrays(65, ""), []string{nestingCapError}},
		{"65 levels against true", `true`, nestedObjects(65, "1"), []string{nestingCapError}},
		{"65 levels against false", `false`, nestedObjects(65, "1"), []string{nestingCapError}},
		{"9000 levels", `{"type": "object"}`, nestedObjects(9000, "null"), []string{nestingCapError}},
		{"deep in one member only", `{"type": "object"}`, `{"ok": 1, "deep": ` + nestedArrays(64, "") + `}`, []string{nestingCapError}},
		{"followed to the bottom of a 63-level schema", nestedPropertiesSchema(31, `{"type": "object", "required": ["b"]}`),
			nestedObjects(32, "{}"), []string{"$" + strings.Repeat(".a", 31) + ".b: required"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireSlice(t, "args_errors", queryRow[[]string](t, db, `SELECT convo.args_errors($1, $2)`, c.schema, c.value), c.want)
		})
	}

	// A tool call: the message is stored, the call rejected with the cap in
	// its evidence.
	registerTestTool(t, db, "store", true, `{"type": "object"}`)
	// A schema 400 levels deep, as a tool registered before the cap could
	// have (inserted as the superuser, which the registry's guard lets by).
	mustExec(t, db, `INSERT INTO convo.tools (name, version, effectful, args_schema, idempotency_scope, deadline)
		VALUES ('legacy_deep', 1, true, $1, 'tool_call', '20 seconds')`, nestedPropertiesSchema(400, `{}`))
	conv := createConversation(t, db, "owner-1", "You store things.")
	appendMsg(t, db, conv, "user", textParts("Store it."))
	msg := appendMsg(t, db, conv, "assistant", effToolUses(
		effCall{"deep_65", "store", nestedObjects(65, "1")},
		effCall{"deep_5000", "store", nestedObjects(5000, "[]")},
		effCall{"legacy", "legacy_deep", nestedObjects(401, "{}")},
		effCall{"fine", "store", nestedObjects(64, "1")}))
	requireCount(t, db, 4, `SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND message_id = $2`, conv, msg)
	for _, call := range []string{"deep_65", "deep_5000", "legacy"} {
		d := effForCall(t, db, conv, call)
		requireEqual(t, call+" decision", [4]any{d.Decision, d.State, d.HTTPStatus, d.ErrorCode},
			[4]any{"rejected", "failed", int32(422), "invalid_arguments"})
		requireSlice(t, call+" evidence", effectEvidenceErrors(t, db, conv, d.EffectID), []string{nestingCapError})
	}
	requireEqual(t, "64 levels", effForCall(t, db, conv, "fine").Decision, "execute")

	// A receipt.
	r := beginReceipt(t, db, "owner-1", "receipt-deep-1", "store", `{}`)
	requireEqual(t, "deep receipt arguments", fillReceipt(t, db, r.ID, nestedObjects(100, "1"), `{}`),
		fillAnswer{Status: "failed", HTTPStatus: 422, ErrorCode: "invalid_arguments"})
}

// TestToolCallIDLength: a tool_use id is 1 to 255 characters. A longer one
// is CV010 (over a cap) and writes nothing (before, an id of a few thousand bytes
// overflowed the btree index that keeps ids unique: SQLSTATE 54000).
func TestToolCallIDLength(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You call tools.")
	appendMsg(t, db, conv, "user", textParts("Go."))
	call := func(id string) string {
		return effToolUses(effCall{id, "weather", `{}`})
	}
	before := fingerprint(t, db)
	runErrorCases(t, db, []errCase{
		{"256 characters", sqlAppend, []any{conv, "assistant", call(strings.Repeat("x", 256))}, "CV010", ""},
		{"6400 ASCII characters", sqlAppend, []any{conv, "assistant", call(strings.Repeat("0123456789abcdef", 400))}, "CV010", ""},
		{"256 four-byte characters", sqlAppend, []any{conv, "assistant", call(strings.Repeat("🐲", 256))}, "CV010", ""},
		{"a long id after a good part", sqlAppend, []any{conv, "assistant",
			`[{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "` + strings.Repeat("y", 3000) + `", "name": "w", "input": {}}]`}, "CV010", ""},
	})
	requireFingerprint(t, db, "refused long tool call ids", before)
	appendMsg(t, db, conv, "assistant", call(strings.Repeat("🐲", 255)))
	appendMsg(t, db, conv, "assistant", call(strings.Repeat("z", 255)))
	requireCount(t, db, 2, `SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND length(tool_call_id) = 255`, conv)
}

// BenchmarkArgsErrorsGrowth times convo.args_errors on an array of N and
// of 4N objects in the same loop and reports their ratio: linear is about
// 4, quadratic 16. A benchmark, not a timed test: the machine is shared.
//
//	go test ./tests -run '^$' -bench ArgsErrorsGrowth -benchtime 20x
func BenchmarkArgsErrorsGrowth(b *testing.B) {
	db := newDB(b)
	schema := `{"type": "array", "items": {"type": "object", "required": ["sku"], "additionalProperties": false,
		"properties": {"sku": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"}, "qty": {"type": "integer", "minimum": 1},
		               "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}}}}}`
	mustExec(b, db, `CREATE TABLE linear_values (n int PRIMARY KEY, v jsonb)`)
	for _, n := range []int{1000, 4000} {
		mustExec(b, db, `INSERT INTO linear_values SELECT $1, jsonb_agg(jsonb_build_object('sku', 'ABC-' || g, 'qty', g, 'tags', '["a", "b"]'::jsonb))
			FROM generate_series(1, $1::int) g`, n)
	}
	timeIt := func(n int) time.Duration {
		start := time.Now()
		if got := queryRow[int](b, db, `SELECT cardinality(convo.args_errors($1, v)) FROM linear_values WHERE n = $2`, schema, n); got != 0 {
			b.Fatalf("%d elements: %d errors", n, got)
		}
		return time.Since(start)
	}
	var small, large time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		small += timeIt(1000)
		large += timeIt(4000)
	}
	b.ReportMetric(float64(large)/float64(small), "4N/N")
}
