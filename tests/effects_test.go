package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// effScopeWant is what the ledger decides for the second call of a
// scenario under one idempotency scope.
type effScopeWant struct {
	decision  string // execute, reuse or confirm
	newEffect bool   // a second effect row (execute, confirm) or the first one linked again (reuse)
}

var (
	effWantExecute = effScopeWant{"execute", true}
	effWantReuse   = effScopeWant{"reuse", false}
	effWantConfirm = effScopeWant{"confirm", true}
)

// effScenario makes two calls of tool in conversation conv (whose root is
// root, "" when it has no system prompt) and returns their ids and the
// fork point the second call should have ("" for the conversation).
type effScenario struct {
	name     string
	noSystem bool
	run      func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (first, second, fork string)
	want     map[string]effScopeWant // by scope: tool_call, conversation_args, fork_args
}

// The arguments of the scenarios: X is the first request; Y asks for
// another amount; X2 is X written differently (same jsonb); X3 is X with
// 500.0 for 500, which is another request (canonical arguments are jsonb's
// text form, and 500.0 keeps its scale).
const (
	effX  = `{"amount_minor": 500, "currency": "EUR"}`
	effY  = `{"amount_minor": 700, "currency": "EUR"}`
	effX2 = `{ "currency" : "EUR",   "amount_minor" : 500 }`
	effX3 = `{"amount_minor": 500.0, "currency": "EUR"}`
)

// effScenarios is the table of expectations. Reading it by scope:
//
//   - tool_call: the key is the tool call, so a new call never shares an
//     effect. Whether it runs at once or waits for a person is the re-run
//     rule: a call on another branch (not the first call's message nor
//     below it) with the same fork point is a re-run → confirm; a call
//     below the first one (same turn, same agent loop) or under another
//     fork point (a new request) → execute.
//   - conversation_args: the key is (conversation, tool, arguments), so
//     the same arguments anywhere in the conversation are one request →
//     reuse, even a genuinely new request later on (the seed's "wrong when
//     the customer genuinely wants a second purchase"); other arguments
//     follow the re-run rule.
//   - fork_args: the key is (fork point, tool, arguments): the same
//     arguments below the same fork point → reuse (typo fix, regenerate,
//     a second call in the same turn or agent loop); a new top-level
//     request has a new fork point → execute; other arguments follow the
//     re-run rule.
//
// The fork point is the parent of the nearest person's turn (a user
// message with a part other than tool_result) at or above the call.
var effScenarios = []effScenario{
	{
		name: "typo-fix edit, same arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			u1 := appendMsg(t, db, conv, "user", textParts("Buy 500 credits, pleas"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			appendMsg(t, db, conv, "tool", effToolResults("c1"))
			appendMsg(t, db, conv, "assistant", textParts("Done."))
			editMsg(t, db, conv, u1, textParts("Buy 500 credits, please"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effX}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantConfirm, "conversation_args": effWantReuse, "fork_args": effWantReuse},
	},
	{
		name: "typo-fix edit, same arguments written differently",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			u1 := appendMsg(t, db, conv, "user", textParts("Buy 500 credits, pleas"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			editMsg(t, db, conv, u1, textParts("Buy 500 credits, please"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effX2}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantConfirm, "conversation_args": effWantReuse, "fork_args": effWantReuse},
	},
	{
		name: "typo-fix edit, 500.0 for 500",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			u1 := appendMsg(t, db, conv, "user", textParts("Buy 500 credits, pleas"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			editMsg(t, db, conv, u1, textParts("Buy 500 credits, please"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effX3}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantConfirm, "conversation_args": effWantConfirm, "fork_args": effWantConfirm},
	},
	{
		name:     "typo-fix edit of a root user message (no system prompt: the fork point is the conversation)",
		noSystem: true,
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			u1 := appendMsg(t, db, conv, "user", textParts("Buy 500 credits, pleas"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			editMsg(t, db, conv, u1, textParts("Buy 500 credits, please"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effX}))
			return "c1", "c2", ""
		},
		want: map[string]effScopeWant{"tool_call": effWantConfirm, "conversation_args": effWantReuse, "fork_args": effWantReuse},
	},
	{
		name: "edit asking for another amount",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			u1 := appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			editMsg(t, db, conv, u1, textParts("Buy 700 credits instead"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effY}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantConfirm, "conversation_args": effWantConfirm, "fork_args": effWantConfirm},
	},
	{
		name: "regenerate, same arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			a1 := appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			regenerateMsg(t, db, conv, a1, effToolUses(effCall{"c2", tool, effX}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantConfirm, "conversation_args": effWantReuse, "fork_args": effWantReuse},
	},
	{
		name: "new top-level request later on the same branch, same arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			appendMsg(t, db, conv, "tool", effToolResults("c1"))
			done := appendMsg(t, db, conv, "assistant", textParts("Done."))
			appendMsg(t, db, conv, "user", textParts("Great, buy another 500"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effX}))
			return "c1", "c2", done
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantReuse, "fork_args": effWantExecute},
	},
	{
		name: "new top-level request later on the same branch, other arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			appendMsg(t, db, conv, "tool", effToolResults("c1"))
			done := appendMsg(t, db, conv, "assistant", textParts("Done."))
			appendMsg(t, db, conv, "user", textParts("Now buy 700"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effY}))
			return "c1", "c2", done
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantExecute, "fork_args": effWantExecute},
	},
	{
		name: "two calls in one assistant message, same arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}, effCall{"c2", tool, effX}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantReuse, "fork_args": effWantReuse},
	},
	{
		name: "two calls in one assistant message, other arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 and 700 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}, effCall{"c2", tool, effY}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantExecute, "fork_args": effWantExecute},
	},
	{
		name: "second assistant message after a tool-result-only user message, same arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			appendMsg(t, db, conv, "user", effToolResults("c1"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effX}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantReuse, "fork_args": effWantReuse},
	},
	{
		name: "second assistant message after a tool-result-only user message, other arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			appendMsg(t, db, conv, "user", effToolResults("c1"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effY}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantExecute, "fork_args": effWantExecute},
	},
	{
		name: "second assistant message after a tool message, other arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			appendMsg(t, db, conv, "tool", effToolResults("c1"))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effY}))
			return "c1", "c2", root
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantExecute, "fork_args": effWantExecute},
	},
	{
		// A user message that carries a result and text is a person's turn:
		// the second call has a fork point of its own (the first call's message).
		name: "second assistant message after a user message with a tool result and text, same arguments",
		run: func(t *testing.T, db *pgxpool.Pool, conv, root, tool string) (string, string, string) {
			appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
			a1 := appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c1", tool, effX}))
			var parts []any
			for _, p := range []string{effToolResults("c1"), textParts("and buy 500 more")} {
				var ps []any
				if err := json.Unmarshal([]byte(p), &ps); err != nil {
					t.Fatal(err)
				}
				parts = append(parts, ps...)
			}
			b, _ := json.Marshal(parts)
			appendMsg(t, db, conv, "user", string(b))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{"c2", tool, effX}))
			return "c1", "c2", a1
		},
		want: map[string]effScopeWant{"tool_call": effWantExecute, "conversation_args": effWantReuse, "fork_args": effWantExecute},
	},
}

// TestEffectScopes runs every scenario under each idempotency scope, each
// in a conversation of its own, and checks the second call's decision, its
// fork point, and whether it got an effect row of its own.
func TestEffectScopes(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	scopes := []string{"tool_call", "conversation_args", "fork_args"}
	for _, scope := range scopes {
		effRegisterPurchase(t, db, "buy_"+scope, scope, "20 seconds")
	}
	for _, sc := range effScenarios {
		for _, scope := range scopes {
			t.Run(sc.name+"/"+scope, func(t *testing.T) {
				want, ok := sc.want[scope]
				if !ok {
					t.Fatalf("no expectation for scope %s", scope)
				}
				tool := "buy_" + scope
				prompt := "You sell credits."
				if sc.noSystem {
					prompt = ""
				}
				conv := createConversation(t, db, "owner-1", prompt)
				root := headOf(t, db, conv)
				first, second, fork := sc.run(t, db, conv, root, tool)

				d1 := effForCall(t, db, conv, first)
				requireEqual(t, "first call", [2]string{d1.Decision, d1.State}, [2]string{"execute", "pending"})
				e1 := effRead(t, db, conv, d1.EffectID)
				d2 := effForCall(t, db, conv, second)
				l2 := effLink(t, db, conv, second)
				requireEqual(t, "decision", d2.Decision, want.decision)
				requireEqual(t, "ledger row's decision", l2.Decision, want.decision)
				requireEqual(t, "fork point", l2.ForkPointID, fork)
				requireEqual(t, "fork point of the first call", effLink(t, db, conv, first).ForkPointID, root)
				requireEqual(t, "a new effect", d2.EffectID != d1.EffectID, want.newEffect)
				wantCount := int64(1)
				if want.newEffect {
					wantCount = 2
				}
				requireEqual(t, "effects in the conversation", effCount(t, db, conv), wantCount)
				for _, e := range []effEffect{e1, effRead(t, db, conv, d2.EffectID)} {
					if !strings.HasPrefix(e.ScopeKey, scope+":") || !effScopeKeyPattern.MatchString(e.ScopeKey) {
						t.Fatalf("scope key %q is not %s:<sha256 hex>", e.ScopeKey, scope)
					}
					requireEqual(t, "idempotency key", e.Key, e.ScopeKey)
				}
				e2 := effRead(t, db, conv, d2.EffectID)
				switch want.decision {
				case "reuse":
					d1.Decision = "reuse"
					requireEqual(t, "reused effect", d2, d1)
				case "execute":
					requireEqual(t, "second effect", [3]string{e2.State, e2.RepeatsEffectID, d2.Key},
						[3]string{"pending", "", e2.ScopeKey})
					if e2.Key == e1.Key {
						t.Fatalf("a new request shares the key %s", e2.Key)
					}
				case "confirm":
					requireEqual(t, "re-run", [3]string{e2.State, e2.RepeatsEffectID, d2.Key},
						[3]string{"awaiting_confirmation", d1.EffectID, e2.ScopeKey})
					if e2.Key == e1.Key {
						t.Fatalf("a re-run shares the key %s", e2.Key)
					}
				}
			})
		}
	}
}

// TestEffectRejectedInput: a call whose input fails the tool's frozen
// schema gets a failed effect, 422 invalid_arguments, whose creation event
// lists the schema errors; rejected calls never deduplicate, and are never
// the earlier call a re-run repeats.
func TestEffectRejectedInput(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const tool = "buy"
	effRegisterPurchase(t, db, tool, "fork_args", "20 seconds") // fork_args would share a key if anything did
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	u1 := appendMsg(t, db, conv, "user", textParts("Buy nothing"))
	const bad = `{"amount_minor": 0, "currency": "eur", "x": 1}`
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{"bad1", tool, bad}))

	d := effForCall(t, db, conv, "bad1")
	requireEqual(t, "rejected call", d, effDecision{EffectID: d.EffectID, Decision: "rejected", State: "failed", Key: d.Key,
		HTTPStatus: 422, ErrorCode: "invalid_arguments"})
	if !strings.HasPrefix(d.Key, "rejected:") {
		t.Fatalf("a rejected call's key %q does not start with rejected:", d.Key)
	}
	e := effRead(t, db, conv, d.EffectID)
	requireEqual(t, "scope key", e.ScopeKey, d.Key)
	if e.SettledAt == nil {
		t.Fatal("a rejected effect is settled at once")
	}
	events := effEvents(t, db, conv)
	if len(events) != 1 || events[0].From != "requested" || events[0].To != "failed" {
		t.Fatalf("events %+v, want one requested → failed", events)
	}
	var evidence struct{ Errors []string }
	if err := json.Unmarshal([]byte(events[0].Evidence), &evidence); err != nil {
		t.Fatalf("evidence %s: %v", events[0].Evidence, err)
	}
	slices.Sort(evidence.Errors)
	requireSlice(t, "evidence errors", evidence.Errors, []string{
		`$.amount_minor: minimum 1`, `$.currency: pattern "^[A-Z]{3}$"`, `$.x: additionalProperties: not allowed`})

	// The same bad call again, twice in one message and once more below:
	// three more effects, three more keys.
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{"bad2", tool, bad}, effCall{"bad3", tool, bad}))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{"bad4", tool, `{}`}))
	keys := map[string]bool{}
	for _, call := range []string{"bad1", "bad2", "bad3", "bad4"} {
		d := effForCall(t, db, conv, call)
		requireEqual(t, call+" decision", [2]string{d.Decision, d.State}, [2]string{"rejected", "failed"})
		keys[d.Key] = true
	}
	requireEqual(t, "distinct keys", len(keys), 4)
	requireEqual(t, "effects", effCount(t, db, conv), int64(4))

	// On another branch, the bad call is rejected again (not held as a
	// re-run), and a valid call executes: the rejected ones are no earlier
	// call to repeat.
	editMsg(t, db, conv, u1, textParts("Buy nothing, please"))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{"bad5", tool, bad}, effCall{"good", tool, effX}))
	requireEqual(t, "bad5", effForCall(t, db, conv, "bad5").Decision, "rejected")
	requireEqual(t, "good", effForCall(t, db, conv, "good").Decision, "execute")

	// A rejected effect is settled: nothing settles it again.
	before := effLedger(t, db)
	requireSQLState(t, effExecErr(db, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1')`, conv, d.EffectID), "CV006")
	requireLedgerUnchanged(t, db, "settling a rejected effect", before)
}

// TestEffectReplayForNonEffectfulTool: a registered tool without effects
// is free to run again: effect_for_call says replay, with NULLs; the ledger
// has no effect for it, only the decision taken when the call was appended.
func TestEffectReplayForNonEffectfulTool(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustExec(t, db, `SELECT convo.register_tool('lookup', false, '{"type": "object"}')`)
	conv := createConversation(t, db, "owner-1", "")
	u1 := appendMsg(t, db, conv, "user", textParts("When does it arrive?"))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{"l1", "lookup", `{"order": 1}`}))
	editMsg(t, db, conv, u1, textParts("When does it arrive, please?"))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{"l2", "lookup", `{"order": 1}`}))
	for _, call := range []string{"l1", "l2"} {
		requireEqual(t, call, effForCall(t, db, conv, call), effDecision{Decision: "replay"})
	}
	requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effects`)
	requireCount(t, db, 2, `SELECT count(*) FROM convo.tool_effect_calls WHERE decision = 'replay' AND effect_id IS NULL`)
	// The decision stands once the tool becomes effectful: the call was appended as replay.
	mustExec(t, db, `SELECT convo.register_tool('lookup', true, '{"type": "object"}')`)
	requireEqual(t, "l1 after an effectful version", effForCall(t, db, conv, "l1"), effDecision{Decision: "replay"})
}

// TestEffectUnregisteredTool: a call of a tool that was not on the
// allowlist when its message was appended never gets a go-ahead (CV007),
// also once the tool is registered; a call appended after registration does.
func TestEffectUnregisteredTool(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	appendMsg(t, db, conv, "user", textParts("Buy 500 credits"))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{"u1", "buy", effX}, effCall{"u2", "lookup", `{}`}))
	requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effects`)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effect_calls`)

	t.Run("unregistered", func(t *testing.T) {
		for _, call := range []string{"u1", "u2"} {
			_, err := effForCallErr(db, conv, call)
			requireSQLState(t, err, "CV007")
		}
	})

	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	t.Run("registered as effectful after the call", func(t *testing.T) {
		_, err := effForCallErr(db, conv, "u1")
		requireSQLState(t, err, "CV007")
		requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effects`)
		appendMsg(t, db, conv, "assistant", effToolUses(effCall{"u3", "buy", effX}))
		requireEqual(t, "a call appended after registration", effForCall(t, db, conv, "u3").Decision, "execute")
	})

	// The contract: "A tool call is checked against the latest version when
	// its message is appended", and effect_for_call's own message says CV007
	// means the tool "was not an effectful tool on the allowlist when the
	// call was appended". A call appended while its tool was unknown was
	// checked against nothing; registering the tool later (here as
	// non-effectful) must not turn it into a go-ahead.
	mustExec(t, db, `SELECT convo.register_tool('lookup', false, '{"type": "object"}')`)
	t.Run("registered as non-effectful after the call", func(t *testing.T) {
		d, err := effForCallErr(db, conv, "u2")
		if sqlState(err) != "CV007" {
			t.Errorf("effect_for_call of a call appended before its tool was registered: got %+v, %v; want CV007", d, err)
		}
		appendMsg(t, db, conv, "assistant", effToolUses(effCall{"u4", "lookup", `{}`}))
		requireEqual(t, "a call appended after registration", effForCall(t, db, conv, "u4").Decision, "replay")
	})

	// The ledger row written at append time is what counts: a later version
	// of the tool that is not effectful does not change a recorded decision.
	mustExec(t, db, `SELECT convo.register_tool('buy', false, '{"type": "object"}')`)
	t.Run("a later non-effectful version keeps the recorded decision", func(t *testing.T) {
		requireEqual(t, "u3", effForCall(t, db, conv, "u3").Decision, "execute")
		appendMsg(t, db, conv, "assistant", effToolUses(effCall{"u5", "buy", effX}))
		requireEqual(t, "u5", effForCall(t, db, conv, "u5"), effDecision{Decision: "replay"})
	})
}

// TestEffectNotFoundAndWrongConversation: a tool call or effect of another
// conversation raises CV003, one that does not exist CV002, a missing id
// CV011; nothing is written.
func TestEffectNotFoundAndWrongConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	convA := createConversation(t, db, "owner-1", "A")
	appendMsg(t, db, convA, "user", textParts("Buy"))
	appendMsg(t, db, convA, "assistant", effToolUses(effBuy("callA", "buy", 500)))
	convB := createConversation(t, db, "owner-2", "B")
	appendMsg(t, db, convB, "user", textParts("Buy"))
	appendMsg(t, db, convB, "assistant", effToolUses(effBuy("callB", "buy", 500)))
	effA := effForCall(t, db, convA, "callA").EffectID
	effB := effForCall(t, db, convB, "callB").EffectID
	missing := newID()

	before := effLedger(t, db)
	type errCase struct {
		name, sql string
		args      []any
		code      string
	}
	cases := []errCase{
		{"effect_for_call, unknown call", `SELECT * FROM convo.effect_for_call($1, $2)`, []any{convA, "nope"}, "CV002"},
		{"effect_for_call, another conversation's call", `SELECT * FROM convo.effect_for_call($1, $2)`, []any{convA, "callB"}, "CV003"},
		{"effect_for_call, unknown conversation", `SELECT * FROM convo.effect_for_call($1, $2)`, []any{missing, "callA"}, "CV002"},
		{"effect_for_call, NULL conversation", `SELECT * FROM convo.effect_for_call($1, $2)`, []any{nil, "callA"}, "CV011"},
		{"effect_for_call, NULL call", `SELECT * FROM convo.effect_for_call($1, $2)`, []any{convA, nil}, "CV011"},
	}
	calls := map[string]string{
		"settle_effect":     `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1')`,
		"compensate_effect": `SELECT convo.compensate_effect($1, $2, 're_1')`,
		"confirm_effect":    `SELECT convo.confirm_effect($1, $2, 'support:ana')`,
		"decline_effect":    `SELECT convo.decline_effect($1, $2, 'support:ana')`,
	}
	for _, fn := range []string{"settle_effect", "compensate_effect", "confirm_effect", "decline_effect"} {
		sql := calls[fn]
		cases = append(cases,
			errCase{fn + ", unknown effect", sql, []any{convA, missing}, "CV002"},
			errCase{fn + ", another conversation's effect", sql, []any{convA, effB}, "CV003"},
			errCase{fn + ", unknown conversation", sql, []any{missing, effA}, "CV002"},
			errCase{fn + ", NULL effect", sql, []any{convA, nil}, "CV011"},
			errCase{fn + ", NULL conversation", sql, []any{nil, effA}, "CV011"},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireSQLState(t, effExecErr(db, c.sql, c.args...), c.code)
			requireLedgerUnchanged(t, db, c.name, before)
		})
	}
}

// TestEffectArgumentChecks: bad arguments to the transition functions raise
// CV011, oversized ones CV010 (a value exactly at the cap is accepted), and
// a failed call writes nothing.
func TestEffectArgumentChecks(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	u1 := appendMsg(t, db, conv, "user", textParts("Buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("p1", "buy", 500), effBuy("p2", "buy", 600), effBuy("p3", "buy", 700)))
	pending := effForCall(t, db, conv, "p1").EffectID
	applied := effForCall(t, db, conv, "p2").EffectID
	effSettle(t, db, conv, applied, "ch_2")
	editMsg(t, db, conv, u1, textParts("Buy, please"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("p4", "buy", 500)))
	awaiting := effForCall(t, db, conv, "p4")
	requireEqual(t, "p4", awaiting.Decision, "confirm")

	maxRef := queryRow[int](t, db, `SELECT convo.max_ref_length()`)
	maxDetail := queryRow[int](t, db, `SELECT convo.max_detail_bytes()`)
	requireEqual(t, "max_detail_bytes", maxDetail, 256*1024)
	longRef := strings.Repeat("r", maxRef+1)
	evidence := func(size int) string {
		return sizedJSON(t, db, size, func(n int) string { return `{"note": "` + letters(n) + `"}` })
	}
	bigEvidence := evidence(maxDetail + 1)

	cases := []struct {
		name, sql, effect string
		args              []any // after conversation and effect
		code              string
	}{
		{"settle as compensated", `SELECT convo.settle_effect($1, $2, 'compensated', p_external_ref => 'ch_1')`, pending, nil, "CV011"},
		{"settle as pending", `SELECT convo.settle_effect($1, $2, 'pending')`, pending, nil, "CV011"},
		{"settle as NULL", `SELECT convo.settle_effect($1, $2, NULL, p_external_ref => 'ch_1')`, pending, nil, "CV011"},
		{"applied without reference", `SELECT convo.settle_effect($1, $2, 'applied')`, pending, nil, "CV011"},
		{"applied with an empty reference", `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => '')`, pending, nil, "CV011"},
		{"applied with an error code", `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1', p_error_code => 'x')`, pending, nil, "CV011"},
		{"failed without error code", `SELECT convo.settle_effect($1, $2, 'failed')`, pending, nil, "CV011"},
		{"failed with a reference", `SELECT convo.settle_effect($1, $2, 'failed', p_external_ref => 'ch_1', p_error_code => 'x')`, pending, nil, "CV011"},
		{"HTTP status 99", `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1', p_http_status => 99)`, pending, nil, "CV011"},
		{"HTTP status 600", `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1', p_http_status => 600)`, pending, nil, "CV011"},
		{"NULL evidence", `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1', p_evidence => NULL)`, pending, nil, "CV011"},
		{"reference too long", `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3)`, pending, []any{longRef}, "CV010"},
		{"error code too long", `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => $3)`, pending, []any{longRef}, "CV010"},
		{"settle evidence too large", `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1', p_evidence => $3::jsonb)`, pending, []any{bigEvidence}, "CV010"},
		{"compensate by NULL", `SELECT convo.compensate_effect($1, $2, NULL)`, applied, nil, "CV011"},
		{"compensate by ''", `SELECT convo.compensate_effect($1, $2, '')`, applied, nil, "CV011"},
		{"compensate with NULL evidence", `SELECT convo.compensate_effect($1, $2, 're_1', NULL)`, applied, nil, "CV011"},
		{"compensated_by too long", `SELECT convo.compensate_effect($1, $2, $3)`, applied, []any{longRef}, "CV010"},
		{"compensate evidence too large", `SELECT convo.compensate_effect($1, $2, 're_1', $3::jsonb)`, applied, []any{bigEvidence}, "CV010"},
		{"confirm by NULL", `SELECT convo.confirm_effect($1, $2, NULL)`, awaiting.EffectID, nil, "CV011"},
		{"confirm by ''", `SELECT convo.confirm_effect($1, $2, '')`, awaiting.EffectID, nil, "CV011"},
		{"decline by NULL", `SELECT convo.decline_effect($1, $2, NULL)`, awaiting.EffectID, nil, "CV011"},
		{"decline by ''", `SELECT convo.decline_effect($1, $2, '')`, awaiting.EffectID, nil, "CV011"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := effLedger(t, db)
			requireSQLState(t, effExecErr(db, c.sql, append([]any{conv, c.effect}, c.args...)...), c.code)
			requireLedgerUnchanged(t, db, c.name, before)
		})
	}

	t.Run("values at the caps are accepted", func(t *testing.T) {
		atCap := evidence(maxDetail)
		ref := strings.Repeat("r", maxRef)
		mustExec(t, db, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_evidence => $4::jsonb)`,
			conv, pending, ref, atCap)
		mustExec(t, db, `SELECT convo.compensate_effect($1, $2, $3, $4::jsonb)`, conv, applied, ref, atCap)
		requireEqual(t, "settled", effRead(t, db, conv, pending).ExternalRef, ref)
		requireEqual(t, "compensated", effRead(t, db, conv, applied).CompensatedBy, ref)
		requireCount(t, db, 2, `SELECT count(*) FROM convo.tool_effect_events
			WHERE conversation_id = $1 AND octet_length(evidence::text) = $2`, conv, maxDetail)
	})
}

// TestEffectAmountAndCurrency: the effect's amount_minor and currency come
// from the tool's amount_arg and currency_arg; a value that is not an
// integer amount or a three-letter code leaves the column NULL rather than
// failing the append (the call itself is valid under this tool's schema),
// and a tool without them records none.
func TestEffectAmountAndCurrency(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustExec(t, db, `SELECT convo.register_tool('pay', true,
		'{"type": "object", "properties": {"amount": {"type": ["integer", "number", "string"]}, "cur": {"type": "string"}}}',
		p_amount_arg => 'amount', p_currency_arg => 'cur')`)
	mustExec(t, db, `SELECT convo.register_tool('buy_plain', true, $1::jsonb)`, effPurchaseSchema)
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	appendMsg(t, db, conv, "user", textParts("Pay"))
	cases := []struct {
		call, tool, input string
		amount            any // int64 or nil
		currency          string
	}{
		{"a1", "pay", `{"amount": 1250, "cur": "USD"}`, int64(1250), "USD"},
		{"a3", "pay", `{}`, nil, ""},
		{"a4", "pay", `{"amount": 12.5, "cur": "usd"}`, nil, ""},
		{"a5", "pay", `{"amount": "500", "cur": "EURO"}`, nil, ""},
		{"a6", "pay", `{"amount": 100000000000000000000, "cur": "EUR"}`, nil, "EUR"},
		{"a7", "buy_plain", effX, nil, ""},
	}
	var calls []effCall
	for _, c := range cases {
		calls = append(calls, effCall{c.call, c.tool, c.input})
	}
	appendMsg(t, db, conv, "assistant", effToolUses(calls...))
	for _, c := range cases {
		d := effForCall(t, db, conv, c.call)
		requireEqual(t, c.call+" decision", d.Decision, "execute")
		e := effRead(t, db, conv, d.EffectID)
		var amount any
		if e.HasAmount {
			amount = e.AmountMinor
		}
		requireEqual(t, c.call+" amount_minor", amount, c.amount)
		requireEqual(t, c.call+" currency", e.Currency, c.currency)
	}
}

// TestEffectWrittenInCallTransaction: the ledger row is written in the
// transaction that stores the tool_use part: visible to it before commit,
// to no one else, and gone with it on rollback.
func TestEffectWrittenInCallTransaction(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	appendMsg(t, db, conv, "user", textParts("Buy"))

	for _, commit := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			call := fmt.Sprintf("tx_%v", commit)
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			var msg string
			if err := tx.QueryRow(ctx, `SELECT convo.append_message($1, 'assistant', $2)::text`, conv,
				effToolUses(effBuy(call, "buy", 500))).Scan(&msg); err != nil {
				t.Fatal(err)
			}
			var decision, state string
			var effects, parts int64
			if err := tx.QueryRow(ctx, `SELECT decision, state FROM convo.effect_for_call($1, $2)`, conv, call).Scan(&decision, &state); err != nil {
				t.Fatal(err)
			}
			requireEqual(t, "inside the transaction", [2]string{decision, state}, [2]string{"execute", "pending"})
			if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM convo.tool_effect_calls l JOIN convo.tool_effects e
				  ON e.conversation_id = l.conversation_id AND e.id = l.effect_id WHERE l.tool_call_id = $1),
				(SELECT count(*) FROM convo.message_parts WHERE tool_call_id = $1)`, call).Scan(&effects, &parts); err != nil {
				t.Fatal(err)
			}
			requireEqual(t, "effect and part inside the transaction", [2]int64{effects, parts}, [2]int64{1, 1})
			requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effect_calls WHERE tool_call_id = $1`, call) // another session
			if !commit {
				if err := tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				requireCount(t, db, 0, `SELECT count(*) FROM convo.message_parts WHERE tool_call_id = $1`, call)
				requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effect_calls WHERE tool_call_id = $1`, call)
				requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effect_events`)
				requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effects`)
				_, err := effForCallErr(db, conv, call)
				requireSQLState(t, err, "CV002")
				return
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			requireEqual(t, "after commit", effForCall(t, db, conv, call).Decision, "execute")
			requireCount(t, db, 1, `SELECT count(*) FROM convo.tool_effects`)
			requireCount(t, db, 1, `SELECT count(*) FROM convo.tool_effect_events`)
		})
	}
}

// TestEffectRetriedAppendWritesNoSecondDecision: a retried append (same
// message id, same parts) returns the first message and writes no second
// ledger row; the same id with other parts raises CV009 and writes nothing.
func TestEffectRetriedAppendWritesNoSecondDecision(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "20 seconds")
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	appendMsg(t, db, conv, "user", textParts("Buy"))
	id := newID()
	parts := effToolUses(effBuy("r1", "buy", 500))
	const sql = `SELECT convo.append_message($1, 'assistant', $2, p_message_id => $3)::text`
	requireEqual(t, "first append", queryRow[string](t, db, sql, conv, parts, id), id)
	first := effForCall(t, db, conv, "r1")
	before := effLedger(t, db)
	requireEqual(t, "retry", queryRow[string](t, db, sql, conv, parts, id), id)
	requireLedgerUnchanged(t, db, "the retried append", before)
	requireEqual(t, "decision after the retry", effForCall(t, db, conv, "r1"), first)
	requireSQLState(t, effExecErr(db, sql, conv, effToolUses(effBuy("r1", "buy", 600)), id), "CV009")
	requireLedgerUnchanged(t, db, "the conflicting retry", before)
}

// TestEffectCrashWindow: a committed pending effect whose request never
// got an answer (the process died after commit) is listed in
// stale_pending_effects with the key to re-send under once its deadline
// has passed, and stays pending: nothing fails it automatically, and
// nothing but a new call creates an effect row. An effect awaiting
// confirmation goes stale the same way; confirming it starts its deadline
// again, under its re-run key.
func TestEffectCrashWindow(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy_fast", "tool_call", "200 milliseconds")
	effRegisterPurchase(t, db, "buy_slow", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	u1 := appendMsg(t, db, conv, "user", textParts("Buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("fast", "buy_fast", 500), effBuy("slow", "buy_slow", 500)))
	fast := effForCall(t, db, conv, "fast")
	slow := effForCall(t, db, conv, "slow")
	fastRow := effRead(t, db, conv, fast.EffectID)
	if d := fastRow.DeadlineAt.Sub(fastRow.RequestedAt); d < 195*time.Millisecond || d > 250*time.Millisecond {
		t.Fatalf("deadline %v after the request, want 200ms", d)
	}
	// (requested_at and deadline_at, confirmed_at and deadline_at, are two
	// readings of clock_timestamp() in one statement: a few microseconds apart.)
	sleepPast := func(deadline time.Time) {
		t.Helper()
		mustExec(t, db, `SELECT pg_sleep(greatest(0, extract(epoch FROM $1::timestamptz - clock_timestamp())) + 0.02)`, deadline)
	}
	sleepPast(fastRow.DeadlineAt)

	effects, events := effCount(t, db, conv), len(effEvents(t, db, conv))
	stale := effStales(t, db, conv)
	requireEqual(t, "stale", len(stale), 1)
	requireEqual(t, "stale row", stale[0], effStale{EffectID: fast.EffectID, ToolName: "buy_fast", State: "pending", Key: fast.Key,
		RequestedAt: stale[0].RequestedAt, DeadlineAt: stale[0].DeadlineAt})
	requireEqual(t, "stale times", stale[0].RequestedAt.Equal(fastRow.RequestedAt) && stale[0].DeadlineAt.Equal(fastRow.DeadlineAt), true)
	requireEqual(t, "the stale effect is still pending", effForCall(t, db, conv, "fast"), fast)
	requireEqual(t, "the slow one", effForCall(t, db, conv, "slow"), slow)
	requireEqual(t, "effects", effCount(t, db, conv), effects)
	requireEqual(t, "events", len(effEvents(t, db, conv)), events)

	// The sweeper learns the outcome under that key and settles it: off the
	// list, and still no new effect row.
	effSettle(t, db, conv, fast.EffectID, "ch_1")
	requireEqual(t, "stale after settling", len(effStales(t, db, conv)), 0)
	requireEqual(t, "effects after settling", effCount(t, db, conv), effects)
	effFail(t, db, conv, slow.EffectID, "timeout")
	requireEqual(t, "effects after failing", effCount(t, db, conv), effects)

	// A re-run held for confirmation goes stale too; confirming it restarts
	// its deadline, and it goes stale again under its re-run key.
	editMsg(t, db, conv, u1, textParts("Buy, please"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("again", "buy_fast", 500)))
	again := effForCall(t, db, conv, "again")
	requireEqual(t, "again", again.Decision, "confirm")
	againRow := effRead(t, db, conv, again.EffectID)
	sleepPast(againRow.DeadlineAt)
	stale = effStales(t, db, conv)
	if len(stale) != 1 || stale[0].EffectID != again.EffectID || stale[0].State != "awaiting_confirmation" || stale[0].Key != again.Key {
		t.Fatalf("stale %+v, want the held re-run", stale)
	}
	effConfirm(t, db, conv, again.EffectID, "support:ana")
	confirmed := effRead(t, db, conv, again.EffectID)
	if confirmed.ConfirmedAt == nil {
		t.Fatal("no confirmed_at")
	}
	if d := confirmed.DeadlineAt.Sub(*confirmed.ConfirmedAt); d < 195*time.Millisecond || d > 250*time.Millisecond {
		t.Fatalf("deadline %v after the confirmation, want 200ms", d)
	}
	sleepPast(confirmed.DeadlineAt)
	stale = effStales(t, db, conv)
	if len(stale) != 1 || stale[0].State != "pending" || stale[0].Key != "rerun:"+again.EffectID+":of:"+fast.EffectID {
		t.Fatalf("stale %+v, want the confirmed re-run under its own key", stale)
	}
	requireEqual(t, "effects at the end", effCount(t, db, conv), effects+1)
}
