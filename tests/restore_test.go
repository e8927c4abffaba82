package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of import_conversation as a DBA's restore that cannot forge history:
// each document an attacker could craft (a sequence moved to its maximum, an
// effectful call answered replay, a link across scopes, an amount its
// arguments do not say, an erasure of content still there, events and head
// moves the API never writes) is refused with CV011 naming the key and the
// row, and writes nothing; what is restored is marked and recorded.

// restoreTools registers, identically in each database, the tools the
// restore story uses: buy (effectful, scope fork_args, amount and currency
// from the arguments) and lookup (no effects: replayed).
func restoreTools(t testing.TB, dbs ...*pgxpool.Pool) {
	t.Helper()
	registerBuyAndLookup(t, "fork_args", dbs...)
}

// restoreStory writes through the API a conversation in which a charge of
// 99999 EUR was applied, then the user edited the question: on the live
// branch a lookup was replayed and a purchase of 1 EUR awaits confirmation
// as a re-run of the charge, which sits orphaned on the abandoned branch.
func restoreStory(t testing.TB, db *pgxpool.Pool, owner string) string {
	t.Helper()
	conv := createConversation(t, db, owner, "You sell credits.")
	user := appendMsg(t, db, conv, "user", textParts("Buy me 99999 credits."))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("call_big", "buy", 99999)))
	effSettle(t, db, conv, effForCall(t, db, conv, "call_big").EffectID, "ch_big")
	appendMsg(t, db, conv, "tool", effToolResults("call_big"))
	editMsg(t, db, conv, user, textParts("Buy me 1 credit, and look up my order."))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("call_small", "buy", 1),
		effCall{ID: "call_look", Name: "lookup", Input: map[string]any{"order": 7}}))
	return conv
}

// docRow returns the first row of the document's array key whose field
// equals value, failing the test if there is none.
func docRow(t testing.TB, x map[string]any, key, field string, value any) map[string]any {
	t.Helper()
	for _, r := range rows(x, key) {
		if r[field] == value {
			return r
		}
	}
	t.Fatalf("no %s row with %s = %v", key, field, value)
	return nil
}

// dropRows removes from the document's array key the rows whose field
// equals value.
func dropRows(x map[string]any, key, field string, value any) {
	var kept []any
	for _, r := range rows(x, key) {
		if r[field] != value {
			kept = append(kept, r)
		}
	}
	x[key] = kept
}

// TestRestoreRefusesWhatTheAPICouldNotWrite: each crafted document is
// refused, for a convo_admin login, with CV011 whose DETAIL names the key
// and the row; every table of both schemas is unchanged; and the good
// document the attacks were made from restores.
func TestRestoreRefusesWhatTheAPICouldNotWrite(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	restoreTools(t, src, dst)
	conv := restoreStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)
	x := decodeExport(t, doc)
	big := docRow(t, x, "tool_calls", "tool_call_id", "call_big")["effect_id"]
	small := docRow(t, x, "tool_calls", "tool_call_id", "call_small")["effect_id"]
	edit := func(f func(x map[string]any)) string { return editExport(t, doc, f) }
	// withoutEffect removes an effect and its events, so that the rest of
	// the document stays consistent.
	withoutEffect := func(x map[string]any, id any) {
		dropRows(x, "effects", "id", id)
		dropRows(x, "effect_events", "effect_id", id)
	}
	cases := []struct {
		name, doc string
		mentions  []string
	}{
		{"an effectful call answered replay, with no effect", edit(func(x map[string]any) {
			c := docRow(t, x, "tool_calls", "tool_call_id", "call_small")
			c["decision"], c["effect_id"] = "replay", nil
			withoutEffect(x, small)
		}), []string{"tool call call_small", "decision replay for buy version 1, which is effectful"}},
		{"the 1 EUR call linked to the orphaned 99999 EUR charge as reuse", edit(func(x map[string]any) {
			c := docRow(t, x, "tool_calls", "tool_call_id", "call_small")
			c["decision"], c["effect_id"] = "reuse", big
			withoutEffect(x, small)
		}), []string{"tool call call_small", "reuses effect", "scope key"}},
		{"an applied effect of 1 whose arguments say 99999", edit(func(x map[string]any) {
			docRow(t, x, "effects", "id", big)["amount_minor"] = 1
		}), []string{"effect", "amount 1 EUR, its arguments say 99999 EUR"}},
		{"an erasure by the DBA dated 2001", edit(func(x map[string]any) {
			x["erasures"] = []any{map[string]any{"id": newID(), "owner_id": "owner-1", "reason": "cleanup", "erased_by": "postgres",
				"erased_at": "2001-01-01T00:00:00+00:00", "import_id": nil, "places": []any{map[string]any{"place": "messages", "rows_redacted": 2}}}}
		}), []string{"erasures: erasure", "before the conversation"}},
		{"an erasure of content that is all still there", edit(func(x map[string]any) {
			x["erasures"] = []any{map[string]any{"id": newID(), "owner_id": "owner-1", "reason": "cleanup", "erased_by": "postgres",
				"erased_at": rows(x, "head_log")[len(rows(x, "head_log"))-1]["moved_at"], "import_id": nil,
				"places": []any{map[string]any{"place": "messages", "rows_redacted": 2}}}}
		}), []string{"erasures: erasure", "is not redacted"}},
		{"an erasure of a place erasure does not write", edit(func(x map[string]any) {
			x["erasures"] = []any{map[string]any{"id": newID(), "owner_id": "owner-1", "reason": "cleanup", "erased_by": "postgres",
				"erased_at": "2001-01-01T00:00:00+00:00", "import_id": nil,
				"places": []any{map[string]any{"place": "receipts", "rows_redacted": 1}}}}
			x["conversation"].(map[string]any)["created_at"] = "2000-01-01T00:00:00+00:00"
		}), []string{"erasures: erasure", "place receipts is not one an erasure writes"}},
		{"an erasure counting more rows than there are", edit(func(x map[string]any) {
			x["erasures"] = []any{map[string]any{"id": newID(), "owner_id": "owner-1", "reason": "cleanup", "erased_by": "postgres",
				"erased_at": "2001-01-01T00:00:00+00:00", "import_id": nil,
				"places": []any{map[string]any{"place": "messages", "rows_redacted": 50}}}}
			x["conversation"].(map[string]any)["created_at"] = "2000-01-01T00:00:00+00:00"
		}), []string{"erasures: erasure", "place messages counts 50 rows, the export holds 6"}},
		{"an effect event by finance-bot dated 2001", edit(func(x map[string]any) {
			e := docRow(t, x, "effect_events", "effect_id", big)
			e["actor"], e["at"] = "finance-bot", "2001-01-01T00:00:00+00:00"
		}), []string{"effect_events: event seq", "before the effect was requested"}},
		{"a head-log row direct_update by postgres", edit(func(x map[string]any) {
			log := rows(x, "head_log")
			last := log[len(log)-1]
			seq, _ := last["seq"].(json.Number).Int64()
			root := rows(x, "messages")[0]["id"]
			x["head_log"] = append(x["head_log"].([]any), map[string]any{"seq": seq + 1, "head_message_id": root,
				"previous_head_id": last["head_message_id"], "moved_at": last["moved_at"], "moved_by": "postgres",
				"reason": "direct_update", "source_seq": nil, "import_id": nil})
			x["conversation"].(map[string]any)["head_message_id"] = root
		}), []string{"head_log: row seq", "direct_update"}},
		{"a second create in the head log", edit(func(x map[string]any) {
			rows(x, "head_log")[1]["reason"] = "create"
		}), []string{"head_log: row seq", "only begins a head log"}},
		{"an event seq beyond bigint", strings.Replace(edit(func(x map[string]any) {
			rows(x, "effect_events")[0]["seq"] = json.Number("1000000000000000001")
		}), "1000000000000000001", "9223372036854775808", 1), []string{"SQLSTATE 22003"}},
		{"an idempotency key of its own choosing", edit(func(x map[string]any) {
			docRow(t, x, "effects", "id", big)["idempotency_key"] = "someone-elses-key-0001"
		}), []string{"effects: effect", "idempotency key someone-elses-key-0001"}},
	}
	admin := loginAs(t, dst, "convo_admin")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := fingerprint(t, dst)
			_, err := importAs(admin, "owner-1", "conversation", c.doc)
			requireSQLState(t, err, "CV011")
			detail := pgError(t, err).Detail
			for _, m := range c.mentions {
				if !strings.Contains(detail, m) {
					t.Errorf("DETAIL %q does not name %q", detail, m)
				}
			}
			requireFingerprint(t, dst, "the refused restore", before)
		})
	}
	t.Run("as convo_app", func(t *testing.T) {
		before := fingerprint(t, dst)
		_, err := importAs(loginAs(t, dst, "convo_app"), "owner-1", "conversation", doc)
		requireSQLState(t, err, "42501")
		requireFingerprint(t, dst, "the refused restore", before)
	})
	if _, err := importAs(admin, "owner-1", "conversation", doc); err != nil {
		t.Fatalf("the good document: %v", err)
	}
	requireEqual(t, "failing checks after the restore", failingChecks(t, dst), "")
	requireSlice(t, "orphaned charges after the restore", effOrphanIDs(t, dst, conv), []string{big.(string)})
}

// TestRestoreNumbersSeqHere: a document whose head-log and event seq sit at
// the top of bigint restores with seq numbered here, from 1 in the
// document's order (seq is per conversation), the document's kept as
// source_seq; every other conversation's head moves and effect
// transitions go on, numbered as before.
func TestRestoreNumbersSeqHere(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	restoreTools(t, src, dst)
	conv := restoreStory(t, src, "owner-1")
	other := restoreStory(t, dst, "owner-2")
	doc := editExport(t, exportAs(t, src, "", conv), func(x map[string]any) {
		for key, top := range map[string]int64{"head_log": 9223372036854775807, "effect_events": 9223372036854775807} {
			r := rows(x, key)
			for i := range r {
				r[i]["seq"] = top - int64(len(r)-1-i)
			}
		}
	})
	otherSeqs := func() string {
		return queryRow[string](t, dst, `SELECT (SELECT max(seq) FROM convo.conversation_head_log WHERE conversation_id = $1)
			|| ' ' || (SELECT max(seq) FROM convo.tool_effect_events WHERE conversation_id = $1)`, other)
	}
	before := otherSeqs()
	if _, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", doc); err != nil {
		t.Fatalf("restore: %v", err)
	}
	x := decodeExport(t, doc)
	requireEqual(t, "the other conversation's seq after the restore", otherSeqs(), before)
	for key, table := range map[string]string{"head_log": "conversation_head_log", "effect_events": "tool_effect_events"} {
		requireEqual(t, table+" numbered from 1", queryRow[string](t, dst, `SELECT min(seq) || '..' || max(seq) || ' ' || count(*)
			FROM convo.`+table+` WHERE conversation_id = $1`, conv), fmt.Sprintf("1..%d %d", len(rows(x, key)), len(rows(x, key))))
	}
	requireRestoredRows(t, dst, conv, queryRow[string](t, dst, `SELECT imported_by FROM convo.imports WHERE conversation_id = $1`, conv), doc)
	// Every owner goes on: a head move and an effect transition elsewhere.
	appendMsg(t, dst, other, "user", textParts("And now?"))
	effConfirm(t, dst, other, effForCall(t, dst, other, "call_small").EffectID, "ops")
	appendMsg(t, dst, conv, "user", textParts("And here?"))
	requireHeadChain(t, readHeadHistory(t, dst, conv))
	requireEqual(t, "failing checks", failingChecks(t, dst), "")
}

// TestRestoredRowsAreToldApart: after a restore, the auditor's query (as in
// the README) tells every restored row from one this database wrote, and
// names who restored it and when; erasure empties the record's content.
func TestRestoredRowsAreToldApart(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	restoreTools(t, src, dst)
	conv := restoreStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)
	app, _ := newRole(t, dst, "NOLOGIN", "convo_admin")
	_, authenticator := newRole(t, dst, "LOGIN NOINHERIT", app)
	err := asRoleAndOwner(authenticator, app, "owner-1", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.import_conversation('owner-1', $1::jsonb)`, doc)
		return err
	})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	appendMsg(t, dst, conv, "user", textParts("Written here."))
	reader := loginAs(t, dst, "convo_reader")
	got := queryAsOwner(t, reader, "", `
		SELECT m.role || ' ' || coalesce(i.format || ' by ' || i.imported_by, 'written here')
		  FROM convo.messages m
		  LEFT JOIN convo.imports i ON i.conversation_id = m.conversation_id AND i.id = m.import_id
		 WHERE m.conversation_id = $1
		 ORDER BY m.created_at`, conv)
	restored := len(rows(decodeExport(t, doc), "messages"))
	if len(got) != restored+1 || got[len(got)-1] != "user written here" {
		t.Fatalf("the auditor's query: %v", got)
	}
	for _, g := range got[:len(got)-1] {
		if !strings.HasSuffix(g, "pgconvo by "+app) {
			t.Fatalf("a restored message reads %q, want it restored by %s", g, app)
		}
	}
	mustExec(t, dst, `SELECT * FROM convo.erase_conversation($1, 'asked')`, conv)
	requireEqual(t, "the record after erasure", queryRow[string](t, dst, `SELECT format || ' ' || imported_by || ' '
		|| (digest IS NULL) || ' ' || (source_key IS NULL) FROM convo.imports WHERE conversation_id = $1`, conv), "pgconvo "+app+" true true")
}

// decodeExport decodes an export document, numbers as they are spelled.
func decodeExport(t testing.TB, doc string) map[string]any {
	t.Helper()
	var x map[string]any
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestRestoreRefusesImportsInACreatedConversation: a conversation imported
// from ChatGPT restores; the same document with its head log begun by
// 'create' (a conversation the API began, into which no import merges,
// holding messages dated by ChatGPT before it was created) is refused with
// CV011 naming the row and the message, and writes nothing.
func TestRestoreRefusesImportsInACreatedConversation(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	conv := mustImport(t, loginAs(t, src, "convo_app"), "owner-1", "chatgpt", tinyChatGPT("created-here", "Hi."))
	doc := exportAs(t, src, "", conv)
	forged := editExport(t, doc, func(x map[string]any) {
		rows(x, "head_log")[0]["reason"] = "create"
		rows(x, "head_log")[0]["import_id"] = nil
	})
	admin := loginAs(t, dst, "convo_admin")
	before := fingerprint(t, dst)
	_, err := importAs(admin, "owner-1", "conversation", forged)
	requireSQLState(t, err, "CV011")
	for _, m := range []string{"head_log: row seq", "has reason create", "came from an import"} {
		if detail := pgError(t, err).Detail; !strings.Contains(detail, m) {
			t.Errorf("DETAIL %q does not name %q", detail, m)
		}
	}
	requireFingerprint(t, dst, "the refused restore", before)
	if _, err := importAs(admin, "owner-1", "conversation", doc); err != nil {
		t.Fatalf("the document as exported: %v", err)
	}
}
