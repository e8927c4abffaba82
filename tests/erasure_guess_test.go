package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests that, after an erasure, no answer of the database depends on whether
// a new request matches the erased content: the kept keys and digests are
// keyed, and the database must not compare a guess with them either.

// pinSchema is the argument schema of the PIN tools: one string.
const pinSchema = `{"type": "object", "required": ["pin"], "additionalProperties": false,
	"properties": {"pin": {"type": "string"}}}`

// errRollBack ends a transaction of inOwnerTx without committing it.
var errRollBack = errors.New("roll back")

// pinGuesses returns n four-digit PINs, right among them.
func pinGuesses(n int, right string) []string {
	out := []string{right}
	for i := 0; len(out) < n; i++ {
		if pin := fmt.Sprintf("%04d", i*37%10000); pin != right {
			out = append(out, pin)
		}
	}
	return out
}

// guessAnswer is what the database answers an application that appends a
// call with a guessed argument and reads its ledger decision: the decision's
// shape (never its ids or keys), or the SQLSTATE and message of the error.
type guessAnswer struct {
	Decision, State, ErrorCode, SQLState, Message, Detail string
	HTTPStatus                                            int32
}

// callGuess appends, as login with the owner set, an assistant message
// with one call of tool with input {"pin": pin}, reads effect_for_call for
// it, and rolls back.
func callGuess(login *pgxpool.Pool, owner, conv, tool, callID, pin string) guessAnswer {
	var a guessAnswer
	err := inOwnerTx(login, owner, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
			effToolUses(effCall{ID: callID, Name: tool, Input: map[string]any{"pin": pin}})); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT decision, coalesce(state, ''), coalesce(http_status, 0), coalesce(error_code, '')
			FROM convo.effect_for_call($1, $2)`, conv, callID).Scan(&a.Decision, &a.State, &a.HTTPStatus, &a.ErrorCode); err != nil {
			return err
		}
		return errRollBack
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, errRollBack):
	case errors.As(err, &pgErr):
		a.SQLState, a.Message, a.Detail = pgErr.Code, pgErr.Message, pgErr.Detail
	default:
		a.SQLState = err.Error()
	}
	return a
}

// TestErasedArgumentsAnswerNoGuess: a call of a tool deduplicated by its
// arguments (conversation_args, fork_args) carries a PIN; the conversation
// is erased (erase_conversation, or erase_owner for its owner). Then the application appends, for 200 guesses of the PIN (the
// right one among them), a call with the guess and reads its decision, each
// in a transaction rolled back: every guess gets the same answer, the right
// one too (no reuse of the erased effect, no collision with its kept key).
// The call made for real after the erasure executes under a key of its own,
// and a repeat of it with the same arguments is still deduplicated.
func TestErasedArgumentsAnswerNoGuess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ scope, eraser, erase string }{
		{"conversation_args", "erase_conversation", `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`},
		{"fork_args", "erase_conversation", `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`},
		{"conversation_args", "erase_owner", `SELECT * FROM convo.erase_owner((SELECT owner_id FROM convo.conversations WHERE id = $1), 'asked by the customer')`},
	} {
		scope := c.scope
		t.Run(scope+" by "+c.eraser, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			tool := "check_pin_" + scope
			mustExec(t, db, `SELECT convo.register_tool($1, true, $2::jsonb, p_idempotency_scope => $3)`, tool, pinSchema, scope)
			conv := createConversation(t, db, "owner-1", "")
			appendMsg(t, db, conv, "user", textParts("My PIN is 4821, check it."))
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{ID: "call_pin", Name: tool, Input: map[string]any{"pin": "4821"}}))
			erased := effForCall(t, db, conv, "call_pin")
			requireEqual(t, "the first call", erased.Decision, "execute")
			mustExec(t, loginAs(t, db, "convo_admin"), c.erase, conv)

			app := loginAs(t, db, "convo_app")
			before := fingerprint(t, db)
			answers := map[guessAnswer][]string{}
			for i, pin := range pinGuesses(200, "4821") {
				a := callGuess(app, "owner-1", conv, tool, fmt.Sprintf("guess_%d", i), pin)
				answers[a] = append(answers[a], pin)
			}
			if len(answers) != 1 {
				for a, pins := range answers {
					t.Logf("%+v: %d guesses, first %s", a, len(pins), pins[0])
				}
				t.Fatalf("the guesses got %d different answers, want one", len(answers))
			}
			for a := range answers {
				requireEqual(t, "the answer to every guess", a, guessAnswer{Decision: "execute", State: "pending"})
			}
			requireFingerprint(t, db, "the rolled-back guesses", before)

			// The call made for real: a new effect under a key of its own.
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{ID: "call_again", Name: tool, Input: map[string]any{"pin": "4821"}}))
			again := effForCall(t, db, conv, "call_again")
			requireEqual(t, "the call after the erasure", again.Decision, "execute")
			if again.EffectID == erased.EffectID || again.Key == erased.Key ||
				effRead(t, db, conv, again.EffectID).ScopeKey == effRead(t, db, conv, erased.EffectID).ScopeKey {
				t.Fatalf("the call after the erasure shares the erased effect's id or key: %+v, %+v", again, erased)
			}
			// Its repeat, with no erasure between, is the same request.
			appendMsg(t, db, conv, "assistant", effToolUses(effCall{ID: "call_repeat", Name: tool, Input: map[string]any{"pin": "4821"}}))
			repeat := effForCall(t, db, conv, "call_repeat")
			requireEqual(t, "the repeat after the erasure", [3]string{repeat.Decision, repeat.EffectID, repeat.Key},
				[3]string{"reuse", again.EffectID, again.Key})
			requireEqual(t, "failing checks", failingChecks(t, db), "")
		})
	}
}

// TestErasedReceiptAnswersNoGuess: a receipt's request holds a PIN; its
// owner is erased. Repeating the receipt's key with 200 guesses of the
// request (the right one among them) answers each with the same error,
// SQLSTATE, message and detail alike, and writes nothing. A receipt filed
// after the erasure is deduplicated as before.
func TestErasedReceiptAnswersNoGuess(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
	first := beginReceipt(t, db, "owner-1", "follow-pin-0001", "file_followup", `{"pin": "4821"}`)
	mustExec(t, loginAs(t, db, "convo_admin"), `SELECT * FROM convo.erase_owner('owner-1', 'asked by the customer')`)

	app := loginAs(t, db, "convo_app")
	before := fingerprint(t, db)
	answers := map[guessAnswer][]string{}
	for _, pin := range pinGuesses(200, "4821") {
		var a guessAnswer
		err := inOwnerTx(app, "owner-1", func(ctx context.Context, tx pgx.Tx) error {
			_, err := beginReceiptOn(tx, "owner-1", "follow-pin-0001", "file_followup", `{"pin": "`+pin+`"}`)
			if err == nil {
				a.Decision = "returned the receipt"
			}
			return err
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			a.SQLState, a.Message, a.Detail = pgErr.Code, pgErr.Message, pgErr.Detail
		}
		answers[a] = append(answers[a], pin)
	}
	if len(answers) != 1 {
		for a, pins := range answers {
			t.Logf("%+v: %d guesses, first %s", a, len(pins), pins[0])
		}
		t.Fatalf("the guesses got %d different answers, want one", len(answers))
	}
	for a := range answers {
		requireEqual(t, "the SQLSTATE of every guess", a.SQLState, "CV009")
		t.Logf("every guess: %s (%s)", a.Message, a.Detail)
	}
	requireFingerprint(t, db, "the guesses", before)

	// A receipt filed after the erasure, under a new key, is a receipt as before.
	second := beginReceipt(t, db, "owner-1", "follow-pin-0002", "file_followup", `{"pin": "4821"}`)
	if !second.Created || second.ID == first.ID {
		t.Fatalf("the receipt after the erasure: %+v", second)
	}
	repeat := beginReceipt(t, db, "owner-1", "follow-pin-0002", "file_followup", `{"pin": "4821"}`)
	requireEqual(t, "its repeat", [2]any{repeat.ID, repeat.Created}, [2]any{second.ID, false})
	requireSQLState(t, asOwner(db, "", `SELECT * FROM convo.begin_receipt('owner-1', 'follow-pin-0002', 'file_followup', '{"pin": "1234"}')`), "CV009")
}

// TestRestoreOfEffectsAroundAnErasure: a conversation with an effect of an
// arguments-scoped tool before an erasure and another after it (the same
// arguments) passes self_check, exports, restores into another database
// (whose secret differs) with self_check clean there, and a repeat of the
// later call there is deduplicated against the restored effect.
func TestRestoreOfEffectsAroundAnErasure(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{"conversation_args", "fork_args"} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			src, dst := newDB(t), newDB(t)
			for _, db := range []*pgxpool.Pool{src, dst} {
				mustExec(t, db, `SELECT convo.register_tool('check_pin', true, $1::jsonb, p_idempotency_scope => $2)`, pinSchema, scope)
			}
			conv := createConversation(t, src, "owner-1", "")
			appendMsg(t, src, conv, "user", textParts("My PIN is 4821, check it."))
			appendMsg(t, src, conv, "assistant", effToolUses(effCall{ID: "call_1", Name: "check_pin", Input: map[string]any{"pin": "4821"}}))
			effSettle(t, src, conv, effForCall(t, src, conv, "call_1").EffectID, "ch_1")
			mustExec(t, src, `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`, conv)
			appendMsg(t, src, conv, "assistant", effToolUses(effCall{ID: "call_2", Name: "check_pin", Input: map[string]any{"pin": "4821"}}))
			later := effForCall(t, src, conv, "call_2")
			requireEqual(t, "the call after the erasure", later.Decision, "execute")
			appendMsg(t, src, conv, "assistant", effToolUses(effCall{ID: "call_3", Name: "check_pin", Input: map[string]any{"pin": "4821"}}))
			requireEqual(t, "its repeat", effForCall(t, src, conv, "call_3").EffectID, later.EffectID)
			requireEqual(t, "failing checks before the export", failingChecks(t, src), "")

			doc := exportAs(t, src, "", conv)
			if _, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", doc); err != nil {
				t.Fatalf("import: %v", err)
			}
			requireEqual(t, "failing checks after the restore", failingChecks(t, dst), "")
			requireEqual(t, "the export of the restored conversation", restoredDoc(t, exportAs(t, dst, "", conv)), restoredDoc(t, doc))
			appendMsg(t, dst, conv, "assistant", effToolUses(effCall{ID: "call_4", Name: "check_pin", Input: map[string]any{"pin": "4821"}}))
			requireEqual(t, "a repeat after the restore", [2]string{effForCall(t, dst, conv, "call_4").Decision,
				effForCall(t, dst, conv, "call_4").EffectID}, [2]string{"reuse", later.EffectID})
		})
	}
}
