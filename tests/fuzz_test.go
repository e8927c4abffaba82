package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Fuzz tests of what the database accepts from a client. Their seeds live
// in testdata/fuzz/<FuzzName>/ (Go's corpus format), so a plain `go test`
// runs them; `go test ./tests -run '^$' -fuzz FuzzAppendMessageParts`
// (or FuzzToolSchema) searches for more. Each target uses one database, and
// each input runs in a transaction that is rolled back, so every input meets
// the same fixture.

// fuzzFixture is the conversation every FuzzAppendMessageParts input is
// appended to: a system prompt, a user turn, and at the head an assistant
// message calling buy (effectful, effPurchaseSchema) and lookup (not
// effectful), whose tool call ids a tool_result may name.
type fuzzFixture struct {
	conv      string
	head      string
	callIDs   map[string]bool // tool_use ids of the head, which is every id of the conversation
	schemaOf  map[string]string
	effectful map[string]bool
}

func newFuzzFixture(t testing.TB, db *pgxpool.Pool) fuzzFixture {
	t.Helper()
	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	registerTestTool(t, db, "lookup", false, `{"type": "object"}`)
	f := fuzzFixture{
		conv:      createConversation(t, db, "owner-fuzz", "You sell credits."),
		callIDs:   map[string]bool{"toolu_seed": true, "toolu_look": true},
		schemaOf:  map[string]string{"buy": effPurchaseSchema, "lookup": `{"type": "object"}`},
		effectful: map[string]bool{"buy": true, "lookup": false},
	}
	appendMsg(t, db, f.conv, "user", textParts("Buy 500 credits."))
	f.head = appendMsg(t, db, f.conv, "assistant", effToolUses(effBuy("toolu_seed", "buy", 500),
		effCall{"toolu_look", "lookup", `{"q": "credits"}`}))
	return f
}

// asJSONB returns the size of text as jsonb text (what the size caps
// measure), and whether PostgreSQL can hold text as a jsonb value at all.
// Text that is not JSON, or JSON that jsonb cannot represent (U+0000, lone
// surrogates, numbers beyond numeric), never reaches the API as jsonb: its
// error (22P02, 22P05, ...) is the parameter's, raised before any pgconvo
// function runs.
func asJSONB(db *pgxpool.Pool, text string) (int, bool) {
	if !utf8.ValidString(text) || strings.ContainsRune(text, 0) || !json.Valid([]byte(text)) {
		return 0, false
	}
	var size int
	err := db.QueryRow(context.Background(), `SELECT octet_length($1::text::jsonb::text)`, text).Scan(&size)
	return size, err == nil
}

// cvError returns "" when err is a PostgreSQL error of class CV (one of
// listed, if any are), else a description of what leaked.
func cvError(err error, listed ...string) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Sprintf("a non-PostgreSQL error: %v", err)
	}
	if !strings.HasPrefix(pgErr.Code, "CV") {
		return fmt.Sprintf("SQLSTATE %s outside class CV: %s", pgErr.Code, pgErr.Message)
	}
	if len(listed) > 0 && !strings.Contains(strings.Join(listed, " "), pgErr.Code) {
		return fmt.Sprintf("SQLSTATE %s, want one of %v: %s", pgErr.Code, listed, pgErr.Message)
	}
	return ""
}

// decodeJSON decodes text keeping numbers as json.Number.
func decodeJSON(text string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// partRuleViolation checks stored parts against the contract's part rules
// (docs/guide.md, "Parts", and docs/api.md's append_message) for
// a message of role under a parent whose tool_use ids are parentCalls, in a
// conversation whose tool_use ids so far are usedIDs. It returns the first
// rule broken, or "".
func partRuleViolation(role string, parts any, parentCalls, usedIDs map[string]bool) string {
	list, ok := parts.([]any)
	if !ok || len(list) == 0 {
		return "parts are not a non-empty array"
	}
	seen := map[string]bool{}
	str := func(p map[string]any, k string) (string, bool) {
		s, ok := p[k].(string)
		return s, ok
	}
	for i, e := range list {
		p, ok := e.(map[string]any)
		if !ok {
			return fmt.Sprintf("part %d is not an object", i)
		}
		typ, _ := str(p, "type")
		switch typ {
		case "text":
			if _, ok := str(p, "text"); !ok {
				return fmt.Sprintf("text part %d without a string text", i)
			}
		case "tool_use":
			id, okID := str(p, "id")
			name, okName := str(p, "name")
			_, okInput := p["input"].(map[string]any)
			switch {
			case role != "assistant":
				return fmt.Sprintf("tool_use part %d in a %s message", i, role)
			case !okID || id == "" || utf8.RuneCountInString(id) > 255 || !okName || name == "" || !okInput:
				return fmt.Sprintf("tool_use part %d is malformed", i)
			case usedIDs[id] || seen[id]:
				return fmt.Sprintf("tool_use part %d repeats tool call id %q", i, id)
			}
			seen[id] = true
		case "tool_result":
			id, okID := str(p, "tool_use_id")
			_, hasContent := p["content"]
			isErr, hasIsErr := p["is_error"]
			_, isBool := isErr.(bool)
			switch {
			case role != "user" && role != "tool":
				return fmt.Sprintf("tool_result part %d in a %s message", i, role)
			case !okID || !hasContent || hasIsErr && !isBool:
				return fmt.Sprintf("tool_result part %d is malformed", i)
			case !parentCalls[id]:
				return fmt.Sprintf("tool_result part %d names %q, no tool_use of the parent", i, id)
			}
		case "attachment":
			uri, okURI := str(p, "uri")
			mt, okMT := str(p, "media_type")
			if !okURI || uri == "" || !okMT || mt == "" {
				return fmt.Sprintf("attachment part %d is malformed", i)
			}
		default:
			return fmt.Sprintf("part %d has type %q", i, typ)
		}
	}
	return ""
}

// FuzzAppendMessageParts: whatever role and parts a client sends,
// append_message answers with a CV SQLSTATE or stores the message; what it
// stores meets the part rules, equals what was sent, part for part, and
// each call of a registered tool gets the ledger decision its input earns.
func FuzzAppendMessageParts(f *testing.F) {
	db := newDB(f)
	fx := newFuzzFixture(f, db)
	f.Fuzz(func(t *testing.T, role, parts string) {
		if _, ok := asJSONB(db, parts); !ok || !utf8.ValidString(role) || strings.ContainsRune(role, 0) {
			return // not text, or not a jsonb value: PostgreSQL refuses the parameter itself
		}
		ctx := context.Background()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		mustTx(t, tx, `SET LOCAL statement_timeout = '10s'`)
		var id string
		err = tx.QueryRow(ctx, `SELECT convo.append_message($1, $2, $3::jsonb)::text`, fx.conv, role, parts).Scan(&id)
		if err != nil {
			if leak := cvError(err); leak != "" {
				t.Fatalf("append_message(%q, %s): %s", role, parts, leak)
			}
			return
		}

		// Stored: the role is a role, the parts are the ones sent and keep
		// the rules.
		switch role {
		case "system", "user", "assistant", "tool":
		default:
			t.Fatalf("append_message stored role %q", role)
		}
		var same bool
		var mismatched int
		if err := tx.QueryRow(ctx, `
			SELECT m.parts = $3::jsonb,
			       (SELECT count(*) FROM convo.message_parts p
			         WHERE p.conversation_id = m.conversation_id AND p.message_id = m.id AND p.body IS DISTINCT FROM m.parts -> p.ordinal)
			       + abs(jsonb_array_length(m.parts) - (SELECT count(*) FROM convo.message_parts p
			                                             WHERE p.conversation_id = m.conversation_id AND p.message_id = m.id))
			  FROM convo.messages m WHERE m.conversation_id = $1 AND m.id = $2`, fx.conv, id, parts).Scan(&same, &mismatched); err != nil {
			t.Fatal(err)
		}
		if !same || mismatched != 0 {
			t.Fatalf("append_message(%q, %s): stored parts differ from those sent (equal %v, %d rows differ)", role, parts, same, mismatched)
		}
		decoded, err := decodeJSON(parts)
		if err != nil {
			t.Fatal(err)
		}
		if broken := partRuleViolation(role, decoded, fx.callIDs, fx.callIDs); broken != "" {
			t.Fatalf("append_message(%q, %s) stored parts that break the rules: %s", role, parts, broken)
		}

		// Each call of a registered tool has its decision: replay without
		// effects, rejected exactly when its input fails the schema.
		rows, err := tx.Query(ctx, `
			SELECT p.tool_call_id, p.tool_name, p.body -> 'input', coalesce(l.decision, '')
			  FROM convo.message_parts p
			  LEFT JOIN convo.tool_effect_calls l ON l.conversation_id = p.conversation_id AND l.tool_call_id = p.tool_call_id
			 WHERE p.conversation_id = $1 AND p.message_id = $2 AND p.type = 'tool_use'`, fx.conv, id)
		if err != nil {
			t.Fatal(err)
		}
		type call struct{ id, tool, input, decision string }
		calls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (call, error) {
			var c call
			return c, r.Scan(&c.id, &c.tool, &c.input, &c.decision)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			schema, registered := fx.schemaOf[c.tool]
			want := ""
			switch {
			case !registered:
			case !fx.effectful[c.tool]:
				want = "replay"
			default:
				var errs []string
				if err := tx.QueryRow(ctx, `SELECT convo.args_errors($1, $2)`, schema, c.input).Scan(&errs); err != nil {
					t.Fatalf("args_errors on a stored input %s: %v", c.input, err)
				}
				want = map[bool]string{true: "execute", false: "rejected"}[len(errs) == 0]
			}
			if c.decision != want {
				t.Fatalf("call %q of %q with input %s: decision %q, want %q", c.id, c.tool, c.input, c.decision, want)
			}
		}
	})
}

// mustTx runs sql in tx and fails the test on error.
func mustTx(t testing.TB, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec %s: %v", sql, err)
	}
}

// FuzzToolSchema: register_tool with any schema either refuses it with
// CV011 or registers it, and registers only schemas of the subset (the
// test's own reading of it, unsupportedSchemaPart, within the nesting cap).
// args_errors of a registered schema on any value answers (never an error),
// one "path: rule" line per failure; and a call whose input is that value
// is stored with the decision args_errors implies.
func FuzzToolSchema(f *testing.F) {
	db := newDB(f)
	conv := createConversation(f, db, "owner-fuzz", "You call one tool.")
	appendMsg(f, db, conv, "user", textParts("Call it."))
	maxRequest := queryRow[int](f, db, `SELECT convo.max_request_bytes()`)
	maxInput := queryRow[int](f, db, `SELECT convo.max_tool_input_bytes()`)
	f.Fuzz(func(t *testing.T, schema, value string) {
		schemaSize, okSchema := asJSONB(db, schema)
		valueSize, okValue := asJSONB(db, value)
		if !okSchema || !okValue {
			return
		}
		ctx := context.Background()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		mustTx(t, tx, `SET LOCAL statement_timeout = '10s'`)
		var version int
		err = tx.QueryRow(ctx, `SELECT convo.register_tool('fuzz_tool', true, $1::jsonb)`, schema).Scan(&version)
		if err != nil {
			listed := []string{"CV011"}
			if schemaSize > maxRequest {
				listed = append(listed, "CV010")
			}
			if leak := cvError(err, listed...); leak != "" {
				t.Fatalf("register_tool(%s): %s", schema, leak)
			}
			return
		}
		decoded, err := decodeJSON(schema)
		if err != nil {
			t.Fatal(err)
		}
		if bad := unsupportedSchemaPart(decoded, "$"); bad != "" {
			t.Fatalf("register_tool accepted %s, which uses %s", schema, bad)
		}
		if depth := jsonDepth(decoded); depth > 64 {
			t.Fatalf("register_tool accepted %s, nested %d levels deep", schema, depth)
		}

		var errs []string
		if err := tx.QueryRow(ctx, `SELECT convo.args_errors($1::jsonb, $2::jsonb)`, schema, value).Scan(&errs); err != nil {
			t.Fatalf("args_errors(%s, %s) on a registered schema: %v", schema, value, err)
		}
		for _, e := range errs {
			if !strings.HasPrefix(e, "$") || !strings.Contains(e, ": ") {
				t.Fatalf("args_errors(%s, %s): %q is not a \"path: rule\" line", schema, value, e)
			}
		}
		v, err := decodeJSON(value)
		if err != nil {
			t.Fatal(err)
		}
		if depth := jsonDepth(v); depth > 64 && (len(errs) != 1 || errs[0] != nestingCapError) {
			t.Fatalf("args_errors(%s, %s) on a value %d levels deep: %q, want the nesting error alone", schema, value, depth, errs)
		}
		if _, isObject := v.(map[string]any); !isObject {
			return // a tool input is an object
		}
		parts := `[{"type": "tool_use", "id": "toolu_fuzz", "name": "fuzz_tool", "input": ` + value + `}]`
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv, parts); err != nil {
			if valueSize > maxInput && cvError(err, "CV010") == "" {
				return // over the tool input cap
			}
			t.Fatalf("appending a call of fuzz_tool with input %s: %v", value, err)
		}
		var decision string
		if err := tx.QueryRow(ctx, `SELECT decision FROM convo.effect_for_call($1, 'toolu_fuzz')`, conv).Scan(&decision); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "execute", false: "rejected"}[len(errs) == 0]; decision != want {
			t.Fatalf("a call of %s with input %s: decision %q, want %q (errors %q)", schema, value, decision, want, errs)
		}
	})
}

// jsonDepth returns how many levels of arrays and objects v nests (a
// scalar 0, [] 1, [[1]] 2), without recursion.
func jsonDepth(v any) int {
	type item struct {
		v     any
		depth int
	}
	max := 0
	stack := []item{{v, 0}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var children []any
		switch c := it.v.(type) {
		case []any:
			children = c
		case map[string]any:
			for _, child := range c {
				children = append(children, child)
			}
		default:
			continue
		}
		if it.depth+1 > max {
			max = it.depth + 1
		}
		for _, child := range children {
			stack = append(stack, item{child, it.depth + 1})
		}
	}
	return max
}
