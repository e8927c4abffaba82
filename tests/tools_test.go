package tests

import (
	"context"
	"strings"
	"testing"
)

// The tool registry (the allowlist): convo.register_tool and convo.tools.

const toolSchemaV1 = `{"type": "object",
	"properties": {"amount_minor": {"type": "integer", "minimum": 1}, "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}},
	"required": ["amount_minor", "currency"]}`

// TestRegisterToolVersions: the same settings return the same version and
// write nothing; a change of any one setting makes the next version, which
// records exactly the new settings, and leaves the earlier versions as they
// were.
func TestRegisterToolVersions(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const register = `SELECT convo.register_tool($1, $2, $3, $4, $5, $6, $7)`
	type settings struct {
		effectful               bool
		schema, scope, deadline string
		amountArg, currencyArg  any
	}
	steps := []struct {
		what string
		s    settings
		want int
	}{
		{"first registration", settings{true, toolSchemaV1, "tool_call", "20 seconds", nil, nil}, 1},
		{"the same settings", settings{true, toolSchemaV1, "tool_call", "20 seconds", nil, nil}, 1},
		{"the same schema with keys in another order and other whitespace",
			settings{true, `{"required":["amount_minor","currency"],"properties":{"currency":{"pattern":"^[A-Z]{3}$","type":"string"},"amount_minor":{"minimum":1,"type":"integer"}},"type":"object"}`,
				"tool_call", "20 seconds", nil, nil}, 1},
		{"the same deadline spelt differently", settings{true, toolSchemaV1, "tool_call", "00:00:20", nil, nil}, 1},
		{"not effectful", settings{false, toolSchemaV1, "tool_call", "20 seconds", nil, nil}, 2},
		{"not effectful again", settings{false, toolSchemaV1, "tool_call", "20 seconds", nil, nil}, 2},
		{"effectful again: the first settings make a new latest version", settings{true, toolSchemaV1, "tool_call", "20 seconds", nil, nil}, 3},
		{"another schema", settings{true, strings.Replace(toolSchemaV1, `"minimum": 1`, `"minimum": 100`, 1), "tool_call", "20 seconds", nil, nil}, 4},
		{"another scope", settings{true, strings.Replace(toolSchemaV1, `"minimum": 1`, `"minimum": 100`, 1), "conversation_args", "20 seconds", nil, nil}, 5},
		{"another deadline", settings{true, strings.Replace(toolSchemaV1, `"minimum": 1`, `"minimum": 100`, 1), "conversation_args", "30 seconds", nil, nil}, 6},
		{"an amount argument", settings{true, strings.Replace(toolSchemaV1, `"minimum": 1`, `"minimum": 100`, 1), "conversation_args", "30 seconds", "amount_minor", nil}, 7},
		{"a currency argument", settings{true, strings.Replace(toolSchemaV1, `"minimum": 1`, `"minimum": 100`, 1), "conversation_args", "30 seconds", "amount_minor", "currency"}, 8},
		{"the same again", settings{true, strings.Replace(toolSchemaV1, `"minimum": 1`, `"minimum": 100`, 1), "conversation_args", "30 seconds", "amount_minor", "currency"}, 8},
		{"fork_args scope", settings{true, strings.Replace(toolSchemaV1, `"minimum": 1`, `"minimum": 100`, 1), "fork_args", "30 seconds", "amount_minor", "currency"}, 9},
	}
	latest := 0
	for _, st := range steps {
		before := readAPIState(t, db)
		got := queryRow[int](t, db, register, "purchase_credits", st.s.effectful, st.s.schema, st.s.scope, st.s.deadline, st.s.amountArg, st.s.currencyArg)
		if got != st.want {
			t.Fatalf("%s: version %d, want %d", st.what, got, st.want)
		}
		requireCount(t, db, int64(st.want), `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`)
		if got == latest {
			// A repeat: nothing written, not even an update of the same row.
			requireAPIUnchanged(t, db, before)
			continue
		}
		latest = got
		// A new version holds exactly the settings it was registered with.
		var same bool
		err := db.QueryRow(context.Background(), `
			SELECT effectful = $2 AND args_schema = $3::jsonb AND idempotency_scope = $4 AND deadline = $5::interval
			       AND amount_arg IS NOT DISTINCT FROM $6 AND currency_arg IS NOT DISTINCT FROM $7
			       AND registered_by = session_user
			  FROM convo.tools WHERE name = 'purchase_credits' AND version = $1`,
			got, st.s.effectful, st.s.schema, st.s.scope, st.s.deadline, st.s.amountArg, st.s.currencyArg).Scan(&same)
		if err != nil || !same {
			t.Fatalf("%s: version %d does not hold the settings it was registered with (err %v)", st.what, got, err)
		}
		// The earlier versions are untouched.
		if after := readAPIState(t, db); !strings.HasPrefix(after.Tools, before.Tools) {
			t.Fatalf("%s: earlier versions changed:\n before %s\n after  %s", st.what, before.Tools, after.Tools)
		}
	}

	// Versions are per tool.
	requireEqual(t, "first version of another tool", registerTestTool(t, db, "search_docs", false, `{}`), 1)
	requireEqual(t, "purchase_credits is still at", queryRow[int](t, db,
		`SELECT max(version) FROM convo.tools WHERE name = 'purchase_credits'`), 9)
}

// TestToolVersionsAreFrozen: UPDATE, DELETE and TRUNCATE on convo.tools
// raise CV005, for the superuser (and table owner) too, and change nothing.
func TestToolVersionsAreFrozen(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	registerTestTool(t, db, "purchase_credits", true, toolSchemaV1)
	mustExec(t, db, `SELECT convo.register_tool('purchase_credits', true, $1, p_deadline => '1 minute')`, toolSchemaV1)
	runCallCases(t, db, []callCase{
		{name: "UPDATE the schema", sql: `UPDATE convo.tools SET args_schema = '{}' WHERE name = 'purchase_credits' AND version = 1`, code: "CV005"},
		{name: "UPDATE the deadline", sql: `UPDATE convo.tools SET deadline = '1 hour'`, code: "CV005"},
		{name: "UPDATE effectful", sql: `UPDATE convo.tools SET effectful = false WHERE version = 2`, code: "CV005"},
		{name: "UPDATE nothing", sql: `UPDATE convo.tools SET deadline = deadline WHERE false`, code: "CV005"},
		{name: "DELETE a version", sql: `DELETE FROM convo.tools WHERE version = 2`, code: "CV005"},
		{name: "DELETE all", sql: `DELETE FROM convo.tools`, code: "CV005"},
		{name: "TRUNCATE", sql: `TRUNCATE convo.tools CASCADE`, code: "CV005"},
	})
	requireCount(t, db, 2, `SELECT count(*) FROM convo.tools`)
}

// TestRegisterToolBadArguments: NULLs, a bad name, an unknown scope, a
// deadline that is not positive, and amount or currency arguments the
// schema does not have, or on a tool that is not effectful, raise CV011; a
// schema over convo.max_request_bytes() raises CV010. None writes anything.
func TestRegisterToolBadArguments(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	registerTestTool(t, db, "existing_tool", true, toolSchemaV1)
	const full = `SELECT convo.register_tool($1, $2, $3, $4, $5, $6, $7)`
	call := func(name any, effectful any, schema any, scope any, deadline any, amount, currency any) []any {
		return []any{name, effectful, schema, scope, deadline, amount, currency}
	}
	big := sizedJSON(t, db, queryRow[int](t, db, `SELECT convo.max_request_bytes()`)+1, func(n int) string {
		return `{"type": "object", "description": "` + letters(n) + `"}`
	})
	runCallCases(t, db, []callCase{
		{name: "NULL name", sql: full, args: call(nil, true, toolSchemaV1, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "empty name", sql: full, args: call("", true, toolSchemaV1, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "name starting with a digit", sql: full, args: call("1tool", true, toolSchemaV1, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "name with a space", sql: full, args: call("my tool", true, toolSchemaV1, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "name with a non-ASCII letter", sql: full, args: call("outil_ü", true, toolSchemaV1, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "name of 129 characters", sql: full, args: call("t"+strings.Repeat("x", 128), true, toolSchemaV1, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "NULL effectful", sql: full, args: call("t1", nil, toolSchemaV1, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "NULL schema", sql: full, args: call("t1", true, nil, "tool_call", "20 seconds", nil, nil), code: "CV011"},
		{name: "NULL scope", sql: full, args: call("t1", true, toolSchemaV1, nil, "20 seconds", nil, nil), code: "CV011"},
		{name: "NULL deadline", sql: full, args: call("t1", true, toolSchemaV1, "tool_call", nil, nil, nil), code: "CV011"},
		{name: "unknown scope", sql: full, args: call("t1", true, toolSchemaV1, "global", "20 seconds", nil, nil), code: "CV011", mentions: []string{"global"}},
		{name: "scope in capitals", sql: full, args: call("t1", true, toolSchemaV1, "TOOL_CALL", "20 seconds", nil, nil), code: "CV011"},
		{name: "zero deadline", sql: full, args: call("t1", true, toolSchemaV1, "tool_call", "0 seconds", nil, nil), code: "CV011"},
		{name: "negative deadline", sql: full, args: call("t1", true, toolSchemaV1, "tool_call", "-1 second", nil, nil), code: "CV011"},
		{name: "amount argument not in the schema's properties", sql: full, args: call("t1", true, toolSchemaV1, "tool_call", "20 seconds", "amount", nil), code: "CV011"},
		{name: "currency argument not in the schema's properties", sql: full, args: call("t1", true, toolSchemaV1, "tool_call", "20 seconds", "amount_minor", "ccy"), code: "CV011"},
		{name: "amount argument, schema without properties", sql: full, args: call("t1", true, `{"type": "object"}`, "tool_call", "20 seconds", "amount_minor", nil), code: "CV011"},
		{name: "currency argument, schema without properties", sql: full, args: call("t1", true, `{"type": "object"}`, "tool_call", "20 seconds", nil, "currency"), code: "CV011"},
		{name: "amount argument on a tool that is not effectful", sql: full, args: call("t1", false, toolSchemaV1, "tool_call", "20 seconds", "amount_minor", nil), code: "CV011"},
		{name: "currency argument on a tool that is not effectful", sql: full, args: call("t1", false, toolSchemaV1, "tool_call", "20 seconds", nil, "currency"), code: "CV011"},
		{name: "a bad new version of an existing tool", sql: full, args: call("existing_tool", true, toolSchemaV1, "tool_call", "0 seconds", nil, nil), code: "CV011"},
		{name: "schema over the cap", sql: full, args: call("t1", true, big, "tool_call", "20 seconds", nil, nil), code: "CV010"},
	})
	if n := queryRow[int](t, db, `SELECT count(*)::int FROM convo.tools`); n != 1 {
		t.Errorf("the refused registrations wrote %d tool versions", n-1)
	}

	// The boundaries that are allowed: a name of 128 characters, a schema of
	// exactly the cap.
	atCap := sizedJSON(t, db, queryRow[int](t, db, `SELECT convo.max_request_bytes()`), func(n int) string {
		return `{"type": "object", "description": "` + letters(n) + `"}`
	})
	requireEqual(t, "version of a 128-character name", registerTestTool(t, db, "t"+strings.Repeat("x", 127), false, `{}`), 1)
	requireEqual(t, "version of a schema at the cap", registerTestTool(t, db, "big_schema", false, atCap), 1)
}
