package pgtest

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Helpers for the effects ledger. Their names start with "Eff".

// EffPurchaseSchema is the purchase tool's argument schema, as in
// examples/purchase.sql.
const EffPurchaseSchema = `{"type": "object", "required": ["amount_minor", "currency"], "additionalProperties": false,
	"properties": {"amount_minor": {"type": "integer", "minimum": 1, "maximum": 100000},
	               "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}`

// EffRegisterPurchase registers an effectful purchase tool called name with
// EffPurchaseSchema, the given idempotency scope and deadline, whose
// amount_minor and currency arguments fill the effect's amount and
// currency; it returns the version.
func EffRegisterPurchase(t testing.TB, db *pgxpool.Pool, name, scope, deadline string) int32 {
	t.Helper()
	return QueryRow[int32](t, db, `
		SELECT convo.register_tool($1, true, $2::jsonb, p_idempotency_scope => $3, p_deadline => $4::interval,
		                           p_amount_arg => 'amount_minor', p_currency_arg => 'currency')`,
		name, EffPurchaseSchema, scope, deadline)
}

// EffCall is one tool_use part.
type EffCall struct {
	ID    string
	Name  string
	Input any // marshalled to JSON; a string is taken as JSON text as is
}

// EffBuy is a call of tool with {"amount_minor": amount, "currency": "EUR"}.
func EffBuy(id, tool string, amount int) EffCall {
	return EffCall{ID: id, Name: tool, Input: map[string]any{"amount_minor": amount, "currency": "EUR"}}
}

// EffToolUses returns the parts of an assistant message made of the given
// tool_use parts, in order.
func EffToolUses(calls ...EffCall) string {
	parts := make([]map[string]any, len(calls))
	for i, c := range calls {
		input := c.Input
		if s, ok := input.(string); ok {
			input = json.RawMessage(s)
		}
		parts[i] = map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// EffToolResults returns the parts of a message that only carries results
// of the given tool calls.
func EffToolResults(callIDs ...string) string {
	parts := make([]map[string]any, len(callIDs))
	for i, id := range callIDs {
		parts[i] = map[string]any{"type": "tool_result", "tool_use_id": id, "content": map[string]any{"ok": true}}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// EffSettle settles a pending effect as applied with external reference ref
// and HTTP status 200.
func EffSettle(t testing.TB, db *pgxpool.Pool, conv, effect, ref string) {
	t.Helper()
	MustExec(t, db, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_http_status => 200)`, conv, effect, ref)
}

// EffFail settles a pending effect as failed with errorCode.
func EffFail(t testing.TB, db *pgxpool.Pool, conv, effect, errorCode string) {
	t.Helper()
	MustExec(t, db, `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => $3)`, conv, effect, errorCode)
}

// EffCompensate compensates an applied effect with the movement by.
func EffCompensate(t testing.TB, db *pgxpool.Pool, conv, effect, by string) {
	t.Helper()
	MustExec(t, db, `SELECT convo.compensate_effect($1, $2, $3)`, conv, effect, by)
}

// EffConfirm confirms an effect awaiting confirmation.
func EffConfirm(t testing.TB, db *pgxpool.Pool, conv, effect, by string) {
	t.Helper()
	MustExec(t, db, `SELECT convo.confirm_effect($1, $2, $3)`, conv, effect, by)
}

// EffDecline declines an effect awaiting confirmation.
func EffDecline(t testing.TB, db *pgxpool.Pool, conv, effect, by string) {
	t.Helper()
	MustExec(t, db, `SELECT convo.decline_effect($1, $2, $3)`, conv, effect, by)
}
