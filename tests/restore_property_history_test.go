package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The history half of TestRestoreProperty (restore_property_test.go): a
// random conversation written through the API by a convo_app login (the
// owner set), with convo_admin's erasures, whose every operation is one an
// application makes.

// rpTools are the tools a history calls: a purchase under each idempotency
// scope and an effect-free lookup. rpRegisterTools registers them, in this
// order, identically in every database of the test.
var rpTools = []struct{ name, scope string }{
	{"buy_tc", "tool_call"}, {"buy_ca", "conversation_args"}, {"buy_fa", "fork_args"},
}

func rpRegisterTools(t testing.TB, dbs ...*pgxpool.Pool) {
	t.Helper()
	for _, db := range dbs {
		for _, tool := range rpTools {
			effRegisterPurchase(t, db, tool.name, tool.scope, "1 hour")
		}
		registerTestTool(t, db, "lookup", false, `{"type": "object"}`)
	}
}

// rpFixtures are the imports a history may start from (tests/testdata/imports).
var rpFixtures = []struct{ ref, format string }{
	{"chatgpt-conversations.json#0", "chatgpt"},
	{"chatgpt-conversations.json#1", "chatgpt"},
	{"openwebui-export.json#0", "openwebui"},
	{"openwebui-chat.json", "openwebui"},
	{"librechat-flat.json", "librechat"},
	{"librechat-recursive.json", "librechat"},
}

// rpHistory is one conversation being written, and what its last export
// says about it (the generator reads its state back rather than modelling
// it: the restore, not the API, is under test).
type rpHistory struct {
	t          testing.TB
	rng        *rand.Rand
	app, admin *pgxpool.Pool
	owner      string
	conv       string
	calls      int
	erasures   int
	trail      []string
	doc        map[string]any // the last export
}

// do runs sql as the application for the owner, scanning one text value
// when the statement returns one (scan false: a void function).
func (h *rpHistory) do(pool *pgxpool.Pool, scan bool, sql string, args ...any) (string, error) {
	var out string
	err := inOwnerTx(pool, h.owner, func(ctx context.Context, tx pgx.Tx) error {
		if !scan {
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}
		return tx.QueryRow(ctx, sql, args...).Scan(&out)
	})
	return out, err
}

// must is do, failing the test (with the trail) on error.
func (h *rpHistory) must(pool *pgxpool.Pool, scan bool, what, sql string, args ...any) string {
	h.t.Helper()
	h.trail = append(h.trail, what)
	out, err := h.do(pool, scan, sql, args...)
	if err != nil {
		h.t.Fatalf("history of %s (owner %s): %s: %v\noperations:\n  %s", h.conv, h.owner, what, err, strings.Join(h.trail, "\n  "))
	}
	return out
}

// refresh reads the conversation back through export_conversation.
func (h *rpHistory) refresh() {
	h.t.Helper()
	out, err := h.do(h.app, true, `SELECT convo.export_conversation($1)::text`, h.conv)
	if err != nil {
		h.t.Fatalf("exporting %s: %v", h.conv, err)
	}
	h.doc = decodeExport(h.t, out)
}

func (h *rpHistory) chance(pct int) bool { return h.rng.IntN(100) < pct }

func rpPick[T any](h *rpHistory, xs []T) T { return xs[h.rng.IntN(len(xs))] }

// messages returns the ids of the conversation's messages in role (any: "").
func (h *rpHistory) messages(role string) []string {
	var out []string
	for _, m := range rows(h.doc, "messages") {
		if role == "" || m["role"] == role {
			out = append(out, m["id"].(string))
		}
	}
	return out
}

func (h *rpHistory) head() string {
	head, _ := h.doc["conversation"].(map[string]any)["head_message_id"].(string)
	return head
}

func (h *rpHistory) headRole() string {
	head := h.head()
	for _, m := range rows(h.doc, "messages") {
		if m["id"] == head {
			return m["role"].(string)
		}
	}
	return ""
}

// effects returns the ids of the effects in state.
func (h *rpHistory) effects(state string) []string {
	var out []string
	for _, e := range rows(h.doc, "effects") {
		if e["state"] == state {
			out = append(out, e["id"].(string))
		}
	}
	return out
}

func (h *rpHistory) generations(state string) []string {
	var out []string
	for _, g := range rows(h.doc, "generations") {
		if g["state"] == state {
			out = append(out, g["id"].(string))
		}
	}
	return out
}

// rpWho is a who-column value a client may pass (NULL: the caller).
func (h *rpHistory) who() any {
	if h.chance(50) {
		return nil
	}
	return rpPick(h, []string{"tab-1", "tab-2", "ops", "worker_7"})
}

// rpStarts are the ways a history begins; history i begins the i-th way
// (round the list), so that every run has each, with random details.
var rpStarts = []string{"create", "fixture", "chatgpt now", "create", "chatgpt tomorrow"}

// start creates the conversation, or imports a fixture or a ChatGPT
// conversation of our own.
func (h *rpHistory) start(kind string) {
	h.t.Helper()
	switch kind {
	case "fixture":
		f := rpPick(h, rpFixtures)
		h.conv = h.must(h.app, true, "import "+f.ref, `SELECT `+importFn(f.format)+`($1, $2::jsonb)::text`,
			h.owner, encodeJSON(h.t, fixtureDoc(h.t, f.ref)))
	case "chatgpt now", "chatgpt tomorrow":
		future := ""
		if kind == "chatgpt tomorrow" {
			future = rpPick(h, []string{"answer", "conversation"})
		}
		h.conv = h.must(h.app, true, fmt.Sprintf("import a ChatGPT conversation of now (dated tomorrow: %q)", future),
			`SELECT convo.import_chatgpt($1, $2::jsonb)::text`, h.owner, rpChatGPTDoc(time.Now(), future))
	default:
		var prompt any
		if h.chance(70) {
			prompt = "You sell credits."
		}
		h.conv = h.must(h.app, true, "create", `SELECT convo.create_conversation($1, $2, $3::jsonb)::text`,
			h.owner, prompt, rpPick(h, []string{`{}`, `{"plan": "pro", "n": 1.50}`}))
	}
	h.refresh()
}

// step makes one random operation and reads the conversation back.
func (h *rpHistory) step() {
	h.t.Helper()
	for {
		if h.try(h.rng.IntN(15)) {
			break
		}
	}
	h.refresh()
}

// try makes operation op if it applies to the conversation as it is.
func (h *rpHistory) try(op int) bool {
	h.t.Helper()
	switch op {
	case 0, 1: // a user turn
		h.must(h.app, true, "append user", `SELECT convo.append_message($1, 'user', $2, p_moved_by => $3)::text`,
			h.conv, textParts(fmt.Sprintf("Question %d", h.rng.IntN(1000))), h.who())
	case 2: // an answer
		h.must(h.app, true, "append assistant", `SELECT convo.append_message($1, 'assistant', $2)::text`,
			h.conv, textParts("An answer."))
	case 3, 4: // a turn of tool calls, their effects driven, their results
		h.toolTurn()
	case 5: // an older effect moves on
		return h.advanceEffect()
	case 6: // edit_and_resend
		users := h.messages("user")
		if len(users) == 0 {
			return false
		}
		h.must(h.app, true, "edit", `SELECT convo.edit_and_resend($1, $2, $3, p_moved_by => $4)::text`,
			h.conv, rpPick(h, users), textParts("Edited."), h.who())
	case 7: // regenerate
		answers := h.messages("assistant")
		if len(answers) == 0 {
			return false
		}
		h.must(h.app, true, "regenerate", `SELECT convo.regenerate($1, $2, $3, p_moved_by => $4)::text`,
			h.conv, rpPick(h, answers), textParts("Another answer."), h.who())
	case 8: // a branch switch, with a reason of the client's
		all := h.messages("")
		if len(all) == 0 {
			return false
		}
		target := rpPick(h, all)
		if target == h.head() {
			return false
		}
		reason := rpPick(h, []string{"switch", "switch", "switch", "undo", "undo", "import"})
		if reason == "import" {
			// A client reason today; if move_head reserves it (as it does
			// create), the refusal is the API's answer and writes nothing.
			_, err := h.do(h.app, false, `SELECT convo.move_head($1, $2, $3, p_moved_by => $4)`, h.conv, target, reason, h.who())
			if err != nil && sqlState(err) != "CV011" {
				h.t.Fatalf("move_head import: %v", err)
			}
			h.trail = append(h.trail, fmt.Sprintf("move_head import (refused: %v)", err != nil))
			return true
		}
		h.must(h.app, false, "move_head "+reason, `SELECT convo.move_head($1, $2, $3, p_moved_by => $4)`,
			h.conv, target, reason, h.who())
	case 9, 10: // a generation on the head
		if h.headRole() != "user" && h.headRole() != "tool" {
			return false
		}
		gen := h.must(h.app, true, "begin_generation", `SELECT convo.begin_generation($1, $2, 'model-1', $3::jsonb)::text`,
			h.conv, h.head(), rpPick(h, []string{`{}`, `{"temperature": 0.5}`}))
		switch h.rng.IntN(4) {
		case 0:
			h.must(h.app, true, "complete_generation", `SELECT convo.complete_generation($1, $2, $3, '{"tokens": 3}', 'stop')::text`,
				h.conv, gen, textParts("Generated."))
		case 1:
			h.must(h.app, false, "fail_generation", `SELECT convo.fail_generation($1, $2, 'overloaded', '{"retry_after": 3}')`, h.conv, gen)
		case 2:
			h.must(h.app, false, "cancel_generation", `SELECT convo.cancel_generation($1, $2)`, h.conv, gen)
		} // else left streaming
	case 11: // a streaming generation ends
		streaming := h.generations("streaming")
		if len(streaming) == 0 {
			return false
		}
		gen := rpPick(h, streaming)
		if h.chance(50) {
			h.must(h.app, true, "complete_generation (later)", `SELECT convo.complete_generation($1, $2, $3)::text`,
				h.conv, gen, textParts("Generated later."))
		} else {
			h.must(h.app, false, "cancel_generation (later)", `SELECT convo.cancel_generation($1, $2)`, h.conv, gen)
		}
	case 12: // a title
		h.must(h.app, false, "set_title", `SELECT convo.set_title($1, $2)`, h.conv, rpPick(h, []string{"Credits", "Orders", "A chat"}))
	case 13: // archive or unarchive
		if h.doc["conversation"].(map[string]any)["archived"] == true {
			h.must(h.app, false, "unarchive", `SELECT convo.unarchive_conversation($1)`, h.conv)
		} else {
			h.must(h.app, false, "archive", `SELECT convo.archive_conversation($1)`, h.conv)
		}
	case 14: // an erasure by the DBA, mid-history
		if h.erasures >= 2 || !h.chance(40) {
			return false
		}
		h.erasures++
		h.must(h.admin, false, "erase_conversation", `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`, h.conv)
	}
	return true
}

// toolTurn appends an assistant message of one to three tool calls (a
// purchase under each scope, amounts from a small set so that arguments
// repeat, now and then one the schema rejects; a lookup), drives each new
// effect, and usually answers them.
func (h *rpHistory) toolTurn() {
	h.t.Helper()
	n := 1 + h.rng.IntN(3)
	var calls []effCall
	var ids []string
	for i := 0; i < n; i++ {
		h.calls++
		id := fmt.Sprintf("call_%d", h.calls)
		ids = append(ids, id)
		if h.chance(20) {
			calls = append(calls, effCall{ID: id, Name: "lookup", Input: map[string]any{"order": h.rng.IntN(3)}})
			continue
		}
		amount := rpPick(h, []int{1, 7, 500, 500, 0})
		calls = append(calls, effBuy(id, rpPick(h, rpTools).name, amount))
	}
	h.must(h.app, true, "append tool calls "+strings.Join(ids, ","), `SELECT convo.append_message($1, 'assistant', $2)::text`,
		h.conv, effToolUses(calls...))
	for _, id := range ids {
		var effect, state string
		err := inOwnerTx(h.app, h.owner, func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT coalesce(effect_id::text, ''), coalesce(state, '') FROM convo.effect_for_call($1, $2)`,
				h.conv, id).Scan(&effect, &state)
		})
		if err != nil {
			h.t.Fatalf("effect_for_call(%s): %v", id, err)
		}
		if effect != "" && h.chance(75) {
			h.drive(effect, state)
		}
	}
	if h.chance(70) {
		h.must(h.app, true, "append tool results", `SELECT convo.append_message($1, 'tool', $2)::text`, h.conv, effToolResults(ids...))
	}
}

// drive moves an effect one or two steps on from state.
func (h *rpHistory) drive(effect, state string) {
	h.t.Helper()
	switch state {
	case "awaiting_confirmation":
		if h.chance(35) {
			h.must(h.app, false, "decline "+effect, `SELECT convo.decline_effect($1, $2, $3)`, h.conv, effect, "carol")
			return
		}
		h.must(h.app, false, "confirm "+effect, `SELECT convo.confirm_effect($1, $2, $3)`, h.conv, effect, "alice")
		if h.chance(50) {
			h.drive(effect, "pending")
		}
	case "pending":
		if h.chance(30) {
			h.must(h.app, false, "settle failed "+effect, `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'card_declined', p_http_status => 402)`,
				h.conv, effect)
			return
		}
		h.must(h.app, false, "settle applied "+effect, `SELECT convo.settle_effect($1, $2, 'applied', $3, 201, NULL, '{"psp": "ok"}')`,
			h.conv, effect, fmt.Sprintf("ch_%d", h.rng.IntN(1_000_000)))
		if h.chance(30) {
			h.drive(effect, "applied")
		}
	case "applied":
		h.must(h.app, false, "compensate "+effect, `SELECT convo.compensate_effect($1, $2, $3, '{"refund": true}')`,
			h.conv, effect, fmt.Sprintf("re_%d", h.rng.IntN(1_000_000)))
	}
}

// advanceEffect moves an older effect on, if there is one that can move.
func (h *rpHistory) advanceEffect() bool {
	var open []string
	state := map[string]string{}
	for _, e := range rows(h.doc, "effects") {
		switch s := e["state"].(string); s {
		case "awaiting_confirmation", "pending", "applied":
			open = append(open, e["id"].(string))
			state[e["id"].(string)] = s
		}
	}
	if len(open) == 0 {
		return false
	}
	e := rpPick(h, open)
	h.drive(e, state[e])
	return true
}

// rpChatGPTDoc is a small ChatGPT conversation of our own, timed around
// now: a question an hour ago and its answer; future "answer" dates the
// answer tomorrow, "conversation" the conversation too (a source clock
// ahead of ours: the import takes its times as they are).
func rpChatGPTDoc(now time.Time, future string) string {
	at := func(d time.Duration) float64 { return float64(now.Add(d).UnixMicro()) / 1e6 }
	answered, created := at(-50*time.Minute), at(-time.Hour)
	if future != "" {
		answered = at(24 * time.Hour)
	}
	if future == "conversation" {
		created = at(23 * time.Hour)
	}
	node := func(id, parent, role, text string, t float64, children ...string) map[string]any {
		return map[string]any{"id": id, "parent": parent, "children": children, "message": map[string]any{
			"id": id, "author": map[string]any{"role": role}, "create_time": t,
			"content": map[string]any{"content_type": "text", "parts": []any{text}}}}
	}
	doc := map[string]any{
		"title": "Now", "create_time": created, "update_time": answered, "id": "fx-prop-now",
		"conversation_id": "fx-prop-now", "current_node": "a1",
		"mapping": map[string]any{
			"root": map[string]any{"id": "root", "message": nil, "parent": nil, "children": []any{"u1"}},
			"u1":   node("u1", "root", "user", "What time is it?", at(-time.Hour), "a1"),
			"a1":   node("a1", "u1", "assistant", "Later than you think.", answered),
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return string(b)
}
