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

// Tests of export_conversation and import_conversation: a round trip into a
// second database that must hold the same rows, the repeat and the
// conflict, every malformed variant refused with nothing written, and the
// owners.

// exportTools registers the tools exportStory uses, identically in every
// database it is given: buy (effectful, scope tool_call, so a re-run on
// another branch awaits confirmation) and lookup (not effectful: replay).
func exportTools(t testing.TB, dbs ...*pgxpool.Pool) {
	t.Helper()
	registerBuyAndLookup(t, "tool_call", dbs...)
}

// registerBuyAndLookup registers, identically in each database, buy
// (effectful, with the given idempotency scope, amount and currency from
// the arguments) and lookup (no effects: replayed).
func registerBuyAndLookup(t testing.TB, scope string, dbs ...*pgxpool.Pool) {
	t.Helper()
	for _, db := range dbs {
		effRegisterPurchase(t, db, "buy", scope, "1 hour")
		registerTestTool(t, db, "lookup", false, `{"type": "object"}`)
	}
}

// exportStory writes, through the API, a conversation with one of
// everything an export holds: metadata, a system prompt, an applied and
// compensated charge on the first branch, an edit with two re-runs of the
// charge, one confirmed and left pending, one confirmed and applied, a rejected call and
// a replayed lookup, a failed generation and a completed regeneration, and
// a head moved back to the first branch. It returns the conversation id.
func exportStory(t testing.TB, db *pgxpool.Pool, owner string) string {
	t.Helper()
	conv := queryRow[string](t, db, `SELECT convo.create_conversation($1, 'You sell credits.', '{"plan": "pro", "n": 1.50}')::text`, owner)
	user := appendMsg(t, db, conv, "user", textParts("Buy me 500 credits."))
	first := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("call_1", "buy", 500)))
	charge := effForCall(t, db, conv, "call_1").EffectID
	mustExec(t, db, `SELECT convo.settle_effect($1, $2, 'applied', 'ch_1', 201, NULL, '{"psp": "ok"}')`, conv, charge)
	mustExec(t, db, `SELECT convo.compensate_effect($1, $2, 're_1', '{"refund": true}')`, conv, charge)
	appendMsg(t, db, conv, "tool", effToolResults("call_1"))

	edited := editMsg(t, db, conv, user, textParts("Buy me 700 credits, and look up my order."))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("call_2", "buy", 500),
		effCall{ID: "call_3", Name: "lookup", Input: map[string]any{"order": 7}},
		effBuy("call_4", "buy", 0), // below the schema's minimum: rejected
		effBuy("call_5", "buy", 700)))
	rerun := effForCall(t, db, conv, "call_2").EffectID
	effConfirm(t, db, conv, rerun, "alice") // confirmed, left pending
	charged := effForCall(t, db, conv, "call_5").EffectID
	effConfirm(t, db, conv, charged, "bob") // confirmed, then applied
	effSettle(t, db, conv, charged, "ch_5")
	mustExec(t, db, `SELECT convo.append_message($1, 'tool', $2)`, conv, effToolResults("call_2", "call_3", "call_4", "call_5"))

	failed := beginGeneration(t, db, conv, edited, "model-1")
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, 'overloaded', '{"retry_after": 3}')`, conv, failed)
	prompt := appendMsg(t, db, conv, "user", textParts("Thanks! Anything else?"))
	answer := completeGeneration(t, db, conv, beginGeneration(t, db, conv, prompt, "model-1"), textParts("No."))
	mustExec(t, db, `SELECT convo.regenerate($1, $2, $3, p_moved_by => 'tab-2')`, conv, answer, textParts("Nothing else."))
	mustExec(t, db, `SELECT convo.move_head($1, $2, 'switch', p_moved_by => 'tab-1')`, conv, first)
	return conv
}

// exportAs returns export_conversation(conv) as text, called by pool in a
// transaction that names owner.
func exportAs(t testing.TB, pool *pgxpool.Pool, owner, conv string) string {
	t.Helper()
	out := queryAsOwner(t, pool, owner, `SELECT convo.export_conversation($1)::text`, conv)
	return out[0]
}

// assigned is what a restore assigns anew instead of reading it from the
// document: the head log's and events' seq (the document's kept beside as
// source_seq), the import that wrote each row, and the effects' keys
// (computed under the restoring database's secret, or kept as sent).
var assigned = []string{"seq", "source_seq", "import_id", "scope_key", "idempotency_key"}

// conversationRows is every row that every package table holds about conv,
// each as its jsonb text, by table: the tables are found from the catalog
// (every table of schema convo with a conversation_id column, and the
// conversation itself), so a table added later is compared too. An
// erasure's xact names the transaction that recorded it, which is the
// importing one after an import, and a tool's registration is the
// database's own: both are left out. With keys to strip (assigned), each
// row goes without them, and the record of a restore into db (an import
// record of format pgconvo that no restore carried in) is left out: what a
// restore adds.
func conversationRows(t testing.TB, db *pgxpool.Pool, conv string, strip ...string) map[string][]string {
	t.Helper()
	mustExec(t, db, `SET TimeZone = 'UTC'`) // each pooled connection prints times the same way
	if strip == nil {
		strip = []string{}
	}
	tables := queryRowsAs[string](t, db, `
		SELECT c.relname::text FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		 WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind = 'r' AND a.attname = 'conversation_id'
		 ORDER BY 1`)
	out := map[string][]string{}
	for _, table := range tables {
		// xact names the recording transaction; live_path's since is when the
		// derived index last changed here, not part of the history.
		out[table] = queryRowsAs[string](t, db, fmt.Sprintf(`SELECT (to_jsonb(t) - 'xact' - 'since' - $2::text[])::text FROM convo.%s t
			WHERE conversation_id = $1 AND NOT (cardinality($2::text[]) > 0 AND to_jsonb(t) @> '{"format": "pgconvo", "import_id": null}')
			ORDER BY 1`, pgx.Identifier{table}.Sanitize()), conv, strip)
	}
	out["conversations"] = queryRowsAs[string](t, db, `SELECT to_jsonb(c)::text FROM convo.conversations c WHERE id = $1`, conv)
	out["erasure_places"] = queryRowsAs[string](t, db, `SELECT to_jsonb(p)::text FROM convo.erasure_places p
		JOIN convo.erasures e ON e.owner_id = p.owner_id AND e.id = p.erasure_id WHERE e.conversation_id = $1 ORDER BY 1`, conv)
	out["tools"] = queryRowsAs[string](t, db, `SELECT (to_jsonb(t) - 'registered_at' - 'registered_by')::text FROM convo.tools t
		WHERE (name, version) IN (SELECT tool_name, tool_version FROM convo.tool_effects WHERE conversation_id = $1) ORDER BY 1`, conv)
	return out
}

// requireSameRows fails unless both databases hold the same rows about conv.
func requireSameRows(t testing.TB, conv string, want, got map[string][]string) {
	t.Helper()
	for table, rows := range want {
		requireSlice(t, "rows of convo."+table+" for conversation "+conv, got[table], rows)
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			t.Errorf("table convo.%s is in one database only", table)
		}
	}
}

// restoredDoc is an export without what a restore assigns (assigned) and
// without the record of a restore into the database that exported it, as
// canonical JSON, to compare an export with what its restore exports.
func restoredDoc(t testing.TB, doc string) string {
	t.Helper()
	return editExport(t, doc, func(x map[string]any) {
		for key, v := range x {
			arr, ok := v.([]any)
			if !ok {
				continue
			}
			var kept []any
			for _, r := range arr {
				row := r.(map[string]any)
				if key == "imports" && row["format"] == "pgconvo" && row["import_id"] == nil {
					continue
				}
				for _, k := range assigned {
					delete(row, k)
				}
				kept = append(kept, row)
			}
			x[key] = kept
		}
	})
}

// requireRestoredRows fails unless every row a restore wrote about conv in
// db names the restore's record (import_id), the record names who restored
// it (by), and the head log and events keep the document's seq, in order,
// as source_seq.
func requireRestoredRows(t testing.TB, db *pgxpool.Pool, conv, by, doc string) {
	t.Helper()
	restore := queryRow[string](t, db, `SELECT id::text FROM convo.imports
		WHERE conversation_id = $1 AND format = 'pgconvo' AND import_id IS NULL`, conv)
	requireEqual(t, "who restored", queryRow[string](t, db, `SELECT imported_by FROM convo.imports WHERE id = $1`, restore), by)
	for _, table := range []string{"messages", "conversation_head_log", "generations", "tool_effects", "tool_effect_calls",
		"tool_effect_events", "erasures"} {
		requireCount(t, db, 0, `SELECT count(*) FROM convo.`+table+` WHERE conversation_id = $1 AND import_id IS DISTINCT FROM $2`, conv, restore)
	}
	x := decodeExport(t, doc)
	for key, table := range map[string]string{"head_log": "conversation_head_log", "effect_events": "tool_effect_events"} {
		var want []string
		for _, r := range rows(x, key) {
			want = append(want, fmt.Sprint(r["seq"]))
		}
		requireSlice(t, "source_seq of "+table+" in seq order", queryRowsAs[string](t, db,
			`SELECT source_seq::text FROM convo.`+table+` WHERE conversation_id = $1 ORDER BY seq`, conv), want)
	}
}

// TestExportRoundTrip: a conversation exported from one database and
// restored into a fresh one by a login member of convo_admin is the same
// rows there (ids, times, reasons, states, who-columns) but for what the
// database assigns (seq numbered in the same order, keys under its secret,
// each row naming the restore), exports to the same document but for
// those, passes self_check, and goes on: the next head move there is
// logged after the restored ones.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	want := conversationRows(t, src, conv)
	for _, table := range []string{"messages", "keyed_parts", "conversation_head_log", "generations",
		"tool_effects", "tool_effect_calls", "tool_effect_events"} {
		if len(want[table]) == 0 {
			t.Fatalf("the story wrote no rows to convo.%s", table)
		}
	}

	doc := exportAs(t, loginAs(t, src, "convo_app"), "owner-1", conv)
	dba, admin := newRole(t, dst, "LOGIN", "convo_admin")
	app := loginAs(t, dst, "convo_app")
	id, err := importAs(admin, "owner-1", "conversation", doc)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	requireEqual(t, "imported conversation id", id, conv)
	requireSameRows(t, conv, conversationRows(t, src, conv, assigned...), conversationRows(t, dst, conv, assigned...))
	requireRestoredRows(t, dst, conv, dba, doc)
	requireEqual(t, "the export of the imported conversation", restoredDoc(t, exportAs(t, app, "owner-1", conv)), restoredDoc(t, doc))
	requireSlice(t, "failed self_check checks after the import", queryRowsAs[string](t, dst,
		`SELECT check_name || ': ' || detail FROM convo.self_check() WHERE NOT ok`), []string{})

	// The conversation goes on where it was: a move is logged after the
	// imported rows, and a new tool call gets its ledger decision.
	lastSeq := queryRow[int64](t, dst, `SELECT max(seq) FROM convo.conversation_head_log WHERE conversation_id = $1`, conv)
	if err := asOwner(app, "owner-1", `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("Buy 3 more.")); err != nil {
		t.Fatalf("append after the import: %v", err)
	}
	history := readHeadHistory(t, dst, conv)
	requireHeadChain(t, history)
	if moved := history[len(history)-1]; moved.Seq <= lastSeq || moved.Reason != "append" {
		t.Fatalf("the move after the import: seq %d reason %s, want after %d, append", moved.Seq, moved.Reason, lastSeq)
	}
	appendMsg(t, dst, conv, "assistant", effToolUses(effBuy("call_6", "buy", 3)))
	requireEqual(t, "decision for a call after the import", effForCall(t, dst, conv, "call_6").Decision, "execute")
}

// TestExportRoundTripOfAnErasedConversation: an erased conversation exports
// its redacted rows and its record of erasures, which read back as they are.
func TestExportRoundTripOfAnErasedConversation(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	mustExec(t, src, `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`, conv)
	want := conversationRows(t, src, conv)
	if len(want["erasures"]) != 1 || len(want["erasure_places"]) == 0 {
		t.Fatalf("the erasure is not recorded: %v, %v", want["erasures"], want["erasure_places"])
	}
	doc := exportAs(t, src, "", conv)
	if _, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", doc); err != nil {
		t.Fatalf("import: %v", err)
	}
	requireSameRows(t, conv, conversationRows(t, src, conv, assigned...), conversationRows(t, dst, conv, assigned...))
	requireEqual(t, "the export of the imported conversation", restoredDoc(t, exportAs(t, dst, "", conv)), restoredDoc(t, doc))
	requireEqual(t, "failing checks after the import", failingChecks(t, dst), "")
}

// TestExportRoundTripOfAnImportedConversation: a ChatGPT conversation
// imported from a sample, then edited, with an effectful call charged and
// settled on the new branch, exports with its origins (the source node of
// every imported message) and reads back row for row, origins included.
func TestExportRoundTripOfAnImportedConversation(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	var sample importSample
	for _, s := range mustSamples(t) {
		if s.format == "chatgpt" && strings.HasPrefix(s.name, "librechat-chatgpt-tree.json") {
			sample = s
		}
	}
	if sample.doc == nil {
		t.Fatal("no sample librechat-chatgpt-tree.json in ../shared/samples/chat-exports")
	}
	conv := mustImport(t, loginAs(t, src, "convo_app"), "owner-1", "chatgpt", encodeJSON(t, sample.doc))
	user := queryRow[string](t, src, `SELECT message_id::text FROM convo.path($1) WHERE role = 'user' ORDER BY depth DESC LIMIT 1`, conv)
	editMsg(t, src, conv, user, textParts("Buy me 500 credits instead."))
	appendMsg(t, src, conv, "assistant", effToolUses(effBuy("call_i", "buy", 500)))
	effSettle(t, src, conv, effForCall(t, src, conv, "call_i").EffectID, "ch_i")
	want := conversationRows(t, src, conv)
	for _, table := range []string{"import_origins", "tool_effects", "tool_effect_events"} {
		if len(want[table]) == 0 {
			t.Fatalf("the imported and edited conversation has no rows in convo.%s", table)
		}
	}

	doc := exportAs(t, src, "", conv)
	if _, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", doc); err != nil {
		t.Fatalf("import: %v", err)
	}
	requireSameRows(t, conv, conversationRows(t, src, conv, assigned...), conversationRows(t, dst, conv, assigned...))
	requireEqual(t, "the export of the imported conversation", restoredDoc(t, exportAs(t, dst, "", conv)), restoredDoc(t, doc))
	requireEqual(t, "failing checks after the import", failingChecks(t, dst), "")
	// The ChatGPT import's own record came along, as a row the restore wrote.
	requireEqual(t, "the carried import record", queryRow[string](t, dst, `SELECT format || ' ' || (import_id IS NOT NULL)
		FROM convo.imports WHERE conversation_id = $1 AND format <> 'pgconvo'`, conv), "chatgpt true")
}

// TestImportRepeatAndConflict: the same export again is a no-op returning
// the id, in the database it came from too and after the restored
// conversation went on; the same id with other content is CV009; both
// write nothing.
func TestImportRepeatAndConflict(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)
	app := loginAs(t, dst, "convo_admin")
	if _, err := importAs(app, "owner-1", "conversation", doc); err != nil {
		t.Fatalf("import: %v", err)
	}
	for _, db := range []*pgxpool.Pool{src, dst} {
		before := fingerprint(t, db)
		id, err := importAs(loginAs(t, db, "convo_admin"), "owner-1", "conversation", doc)
		if err != nil {
			t.Fatalf("repeat: %v", err)
		}
		requireEqual(t, "repeat's id", id, conv)
		requireFingerprint(t, db, "the repeated import", before)
	}

	before := fingerprint(t, dst)
	changed := editExport(t, doc, func(x map[string]any) {
		x["conversation"].(map[string]any)["metadata"] = map[string]any{"plan": "free"}
	})
	_, err := importAs(app, "owner-1", "conversation", changed)
	requireSQLState(t, err, "CV009")
	requireFingerprint(t, dst, "the conflicting import", before)
	// A conversation that went on since its export is other content in
	// the database it came from; where it was restored, the same document
	// is still a repeat of that restore (its digest is on record).
	appendMsg(t, src, conv, "user", textParts("One more thing."))
	appendMsg(t, dst, conv, "user", textParts("One more thing."))
	before = fingerprint(t, src)
	_, err = importAs(loginAs(t, src, "convo_admin"), "owner-1", "conversation", doc)
	requireSQLState(t, err, "CV009")
	requireFingerprint(t, src, "the conflicting import", before)
	before = fingerprint(t, dst)
	if id, err := importAs(app, "owner-1", "conversation", doc); err != nil || id != conv {
		t.Fatalf("the restore again after the conversation went on: %s, %v", id, err)
	}
	requireFingerprint(t, dst, "the repeated restore", before)
}

// editExport decodes an export, lets edit change it, and encodes it again.
func editExport(t testing.TB, doc string, edit func(x map[string]any)) string {
	t.Helper()
	x := decodeExport(t, doc)
	edit(x)
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rows returns the export's array key as its objects.
func rows(x map[string]any, key string) []map[string]any {
	var out []map[string]any
	for _, r := range x[key].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

// TestImportRefusesMalformedExports: every malformed variant of a good
// export is refused with the contract's SQLSTATE, and writes nothing.
func TestImportRefusesMalformedExports(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)
	unknown := newID()
	edit := func(f func(x map[string]any)) string { return editExport(t, doc, f) }
	byState := func(x map[string]any, state string) map[string]any {
		for _, e := range rows(x, "effects") {
			if e["state"] == state {
				return e
			}
		}
		t.Fatalf("no %s effect in the export", state)
		return nil
	}
	cases := []struct {
		name, doc, code string
	}{
		{"not an object", `[]`, "CV011"},
		{"an unknown format", edit(func(x map[string]any) { x["format"] = "other.export" }), "CV011"},
		{"an unknown version", edit(func(x map[string]any) { x["version"] = 4 }), "CV011"},
		{"version 1", edit(func(x map[string]any) { x["version"] = 1 }), "CV011"},
		{"no version", edit(func(x map[string]any) { delete(x, "version") }), "CV011"},
		{"no head log", edit(func(x map[string]any) { delete(x, "head_log") }), "CV011"},
		{"messages not an array", edit(func(x map[string]any) { x["messages"] = map[string]any{} }), "CV011"},
		{"an unknown key", edit(func(x map[string]any) { x["comments"] = []any{} }), "CV011"},
		{"an origin of a message not in the export", edit(func(x map[string]any) {
			x["origins"] = []any{map[string]any{"message_id": newID(), "source": "chatgpt", "node_key": "n1", "node": map[string]any{}}}
		}), "CV011"},
		{"no conversation id", edit(func(x map[string]any) { delete(x["conversation"].(map[string]any), "id") }), "CV011"},
		{"another owner's export", edit(func(x map[string]any) { x["conversation"].(map[string]any)["owner_id"] = "owner-2" }), "CV011"},
		{"a message whose parent is not in the export", edit(func(x map[string]any) { rows(x, "messages")[3]["parent_id"] = unknown }), "CV011"},
		{"a message twice", edit(func(x map[string]any) { x["messages"] = append(x["messages"].([]any), x["messages"].([]any)[2]) }), "CV011"},
		{"a cycle", edit(func(x map[string]any) {
			m := rows(x, "messages")
			m[0]["parent_id"] = m[1]["id"]
		}), "CV011"},
		{"a head not in the tree", edit(func(x map[string]any) { x["conversation"].(map[string]any)["head_message_id"] = unknown }), "CV011"},
		{"a head the log does not end at", edit(func(x map[string]any) {
			x["conversation"].(map[string]any)["head_message_id"] = rows(x, "messages")[0]["id"]
		}), "CV011"},
		{"a broken head log", edit(func(x map[string]any) { x["head_log"] = x["head_log"].([]any)[1:] }), "CV011"},
		{"a head-log row naming an unknown message", edit(func(x map[string]any) { rows(x, "head_log")[1]["previous_head_id"] = unknown }), "CV011"},
		{"a generation on an unknown prompt", edit(func(x map[string]any) { rows(x, "generations")[0]["prompt_message_id"] = unknown }), "CV011"},
		{"an event for an unknown effect", edit(func(x map[string]any) { rows(x, "effect_events")[0]["effect_id"] = unknown }), "CV011"},
		{"a tool call naming an unknown effect", edit(func(x map[string]any) { rows(x, "tool_calls")[0]["effect_id"] = unknown }), "CV011"},
		{"a tool call naming an unknown message", edit(func(x map[string]any) { rows(x, "tool_calls")[0]["message_id"] = unknown }), "CV011"},
		{"an effect whose events skip a transition", edit(func(x map[string]any) {
			id := byState(x, "compensated")["id"]
			var kept []any
			for _, e := range rows(x, "effect_events") {
				if !(e["effect_id"] == id && e["to_state"] == "applied") {
					kept = append(kept, e)
				}
			}
			x["effect_events"] = kept
		}), "CV011"},
		{"an effect in another state than its events say", edit(func(x map[string]any) { byState(x, "pending")["state"] = "applied" }), "CV011"},
		{"an effect of a tool not in the export", edit(func(x map[string]any) { x["tools"] = []any{} }), "CV011"},
		// (A deadline of its own would also disagree with its effects'
		// deadlines, which the restore refuses first, CV011.)
		{"a tool registered here with other settings", edit(func(x map[string]any) {
			rows(x, "tools")[0]["args_schema"].(map[string]any)["title"] = "registered elsewhere"
		}), "CV007"},
		{"a sibling position that does not read back", edit(func(x map[string]any) {
			for _, m := range rows(x, "messages") {
				if m["sibling_index"] == json.Number("2") {
					m["sibling_index"] = 5
					return
				}
			}
		}), "CV011"},
		{"a key a message row does not have", edit(func(x map[string]any) { rows(x, "messages")[0]["colour"] = "red" }), "CV011"},
		{"a message row without its time", edit(func(x map[string]any) { delete(rows(x, "messages")[1], "created_at") }), "CV011"},
		{"a malformed uuid", edit(func(x map[string]any) { rows(x, "head_log")[0]["head_message_id"] = "not-a-uuid" }), "CV011"},
		{"a malformed time", edit(func(x map[string]any) { rows(x, "head_log")[0]["moved_at"] = "yesterday-ish" }), "CV011"},
		{"an unknown head-log reason", edit(func(x map[string]any) { rows(x, "head_log")[0]["reason"] = "Not A Reason" }), "CV011"},
		{"a malformed part", edit(func(x map[string]any) { rows(x, "messages")[1]["parts"] = []any{map[string]any{"type": "text"}} }), "CV008"},
		{"an erasure of another owner", edit(func(x map[string]any) {
			x["erasures"] = []any{map[string]any{"id": unknown, "owner_id": "owner-2", "reason": "r", "erased_by": "dba",
				"erased_at": "2026-01-01T00:00:00+00:00", "places": []any{}}}
		}), "CV011"},
	}
	app := loginAs(t, dst, "convo_admin")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := fingerprint(t, dst)
			_, err := importAs(app, "owner-1", "conversation", c.doc)
			requireSQLState(t, err, c.code)
			if detail := pgError(t, err).Detail; detail == "" {
				t.Errorf("no DETAIL: %v", err)
			}
			requireFingerprint(t, dst, "the refused import", before)
		})
	}
	// The good export, against which every variant was refused, imports.
	if _, err := importAs(app, "owner-1", "conversation", doc); err != nil {
		t.Fatalf("the good export: %v", err)
	}
}

// TestExportAndImportOwners: export is a read scoped to the owner (another
// owner's conversation is CV002; convo_reader reads every owner's); a
// restore is convo_admin's, for any owner: a login of convo_app or
// convo_reader gets 42501, whatever owner it names.
func TestExportAndImportOwners(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)

	srcApp := loginAs(t, src, "convo_app")
	err := asOwner(srcApp, "owner-2", `SELECT convo.export_conversation($1)`, conv)
	requireSQLState(t, err, "CV002")
	err = asOwner(srcApp, "", `SELECT convo.export_conversation($1)`, conv)
	requireSQLState(t, err, "CV002")
	requireEqual(t, "convo_reader's export", exportAs(t, loginAs(t, src, "convo_reader"), "", conv), doc)

	before := fingerprint(t, dst)
	for _, role := range []string{"convo_app", "convo_reader"} {
		login := loginAs(t, dst, role)
		for _, owner := range []string{"owner-1", "owner-2", ""} {
			err := inOwnerTx(login, owner, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT convo.import_conversation('owner-1', $1::jsonb)`, doc)
				return err
			})
			requireSQLState(t, err, "42501")
		}
	}
	requireFingerprint(t, dst, "the refused imports", before)
	err = inOwnerTx(loginAs(t, dst, "convo_admin"), "", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.import_conversation('owner-1', $1::jsonb)`, doc)
		return err
	})
	if err != nil {
		t.Fatalf("a restore by convo_admin naming no owner: %v", err)
	}
}
