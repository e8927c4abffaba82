package tests

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Restores of forged documents that changed what the application does
// afterwards: a key planted on an erased effect, a key that is no scope's,
// an import record that stood in for a later genuine import.

// TestRestoreCannotPlantAKey: the DBA restores an erased conversation once
// in a transaction it rolls back and reads the key the owner's next
// purchase takes there; then restores the document with that key set on the
// erased charge, whose input erasure left nothing to check it against. The
// owner's next purchase must never reuse the old charge: a restored erased
// effect is keyed by its id, never by the document's scope key. (The
// document's idempotency key is kept, since it may have been sent; where a
// forged one equals the key of the next purchase, that purchase is refused,
// 23505, writing nothing, rather than sent under another charge's key.)
func TestRestoreCannotPlantAKey(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	registerBuyAndLookup(t, "conversation_args", src, dst)
	conv := queryRow[string](t, src, `SELECT convo.create_conversation('owner-1', 'You sell credits.', '{}')::text`)
	appendMsg(t, src, conv, "user", textParts("Buy me 500 credits."))
	appendMsg(t, src, conv, "assistant", effToolUses(effBuy("call_1", "buy", 500)))
	charge := effForCall(t, src, conv, "call_1").EffectID
	mustExec(t, src, `SELECT convo.settle_effect($1, $2, 'applied', 'ch_1', 201, NULL, '{}')`, conv, charge)
	appendMsg(t, src, conv, "tool", effToolResults("call_1"))
	mustExec(t, src, `SELECT * FROM convo.erase_conversation($1, 'gdpr')`, conv)
	erased := exportAs(t, src, "", conv)

	dba := loginAs(t, dst, "convo_admin", "convo_app")
	web := loginAs(t, dst, "convo_app")
	purchase := func(ctx context.Context, tx pgx.Tx, call string) (decision, key string, err error) {
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`, conv, effToolUses(effBuy(call, "buy", 500))); err != nil {
			return "", "", err
		}
		err = tx.QueryRow(ctx, `SELECT decision, idempotency_key FROM convo.effect_for_call($1, $2)`, conv, call).Scan(&decision, &key)
		return decision, key, err
	}
	var planted string
	err := inOwnerTx(dba, "owner-1", func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT convo.import_conversation('owner-1', $1::jsonb)`, erased); err != nil {
			return err
		}
		_, key, err := purchase(ctx, tx, "call_9")
		if err != nil {
			return err
		}
		planted = key
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatalf("the dry run: %v", err)
	}
	forged := editExport(t, erased, func(x map[string]any) {
		e := rows(x, "effects")[0]
		e["scope_key"] = planted
		e["idempotency_key"] = planted
	})
	err = inOwnerTx(dba, "", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.import_conversation('owner-1', $1::jsonb)`, forged)
		return err
	})
	if err != nil && sqlState(err) != "CV011" {
		t.Fatalf("the forged restore: want it accepted or CV011, got %v", err)
	}
	if err == nil {
		var decision, key string
		before := fingerprint(t, dst)
		err := inOwnerTx(web, "owner-1", func(ctx context.Context, tx pgx.Tx) error {
			var err error
			decision, key, err = purchase(ctx, tx, "call_77")
			return err
		})
		switch {
		case sqlState(err) == "23505":
			requireFingerprint(t, dst, "the refused purchase", before)
		case err != nil:
			t.Fatal(err)
		case decision != "execute" || key == planted:
			t.Fatalf("the owner's next purchase after the restore: decision %s, key planted: %v", decision, key == planted)
		}
		requireEqual(t, "failing checks", failingChecks(t, dst), "")
	}
}

// TestRestoreRefusesAKeyOfNoScope: an idempotency key is checked against the
// API's scopes, not against a pattern the document's own scope key spells
// (".*|" matched any key), so an effect cannot be restored with another
// party's key for the application to send.
func TestRestoreRefusesAKeyOfNoScope(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := queryRow[string](t, src, `SELECT convo.create_conversation('owner-1', 'You sell credits.', '{}')::text`)
	appendMsg(t, src, conv, "user", textParts("Buy me 500 credits."))
	appendMsg(t, src, conv, "assistant", effToolUses(effBuy("call_1", "buy", 500)))
	effForCall(t, src, conv, "call_1")
	doc := exportAs(t, src, "", conv)
	admin := loginAs(t, dst, "convo_admin")
	for _, c := range []struct{ name, scope, key string }{
		{"a pattern for a scope", ".*|", "psp-key-of-another-merchant-order-4711"},
		{"a key of another scope", "", "conversation_args:" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"},
		{"a scope key that is no regular expression", "([", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			forged := editExport(t, doc, func(x map[string]any) {
				e := rows(x, "effects")[0]
				if c.scope != "" {
					e["scope_key"] = c.scope
				}
				if c.key != "" {
					e["idempotency_key"] = c.key
				}
			})
			before := fingerprint(t, dst)
			_, err := importAs(admin, "owner-1", "conversation", forged)
			requireSQLState(t, err, "CV011")
			if d := pgError(t, err).Detail; !strings.Contains(d, "effects: effect "+rows(decodeExport(t, doc), "effects")[0]["id"].(string)) {
				t.Fatalf("the refusal names no effect: %s", d)
			}
			requireFingerprint(t, dst, "the refused restore", before)
		})
	}
}

// TestRestoredImportRecordIsNoRepeat: a restored document's import record
// (another product's source key, a digest of its own) is history: the
// owner's genuine import of that source afterwards is not refused as "other
// content" of it, nor answered with the restored conversation.
func TestRestoredImportRecordIsNoRepeat(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)
	admin := loginAs(t, dst, "convo_admin")
	web := loginAs(t, dst, "convo_app")
	planted := editExport(t, doc, func(x map[string]any) {
		at := x["conversation"].(map[string]any)["last_activity_at"]
		x["imports"] = []any{map[string]any{"id": newID(), "owner_id": "owner-1", "format": "chatgpt", "source_key": "42:foo",
			"digest": "forged", "imported_by": "someone", "imported_at": at, "import_id": nil}}
	})
	restored, err := importAs(admin, "owner-1", "conversation", planted)
	if err != nil && sqlState(err) != "CV011" {
		t.Fatalf("the planted record: want it accepted or CV011, got %v", err)
	}
	id := mustImport(t, web, "owner-1", "chatgpt", tinyChatGPT("42:foo", "Hi."))
	if id == restored {
		t.Fatal("the genuine import answered with the restored conversation")
	}
	requireEqual(t, "its repeat", mustImport(t, web, "owner-1", "chatgpt", tinyChatGPT("42:foo", "Hi.")), id)
}
