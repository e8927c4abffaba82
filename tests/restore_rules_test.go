package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of the restore's rules against the API's: a document no API call
// could have written is refused (times out of order or not finite, a
// generation answered by anything but an assistant reply to its prompt, an
// origin that no import of the document wrote), and a history the API did
// write (an import whose source is dated ahead, a retried restore) restores.

// setTimes sets every time of the document (each key ending in _at, and
// an event's at) to value.
func setTimes(x map[string]any, value any) {
	for _, v := range x {
		var objs []map[string]any
		switch v := v.(type) {
		case map[string]any:
			objs = append(objs, v)
		case []any:
			for _, r := range v {
				if o, ok := r.(map[string]any); ok {
					objs = append(objs, o)
				}
			}
		}
		for _, o := range objs {
			for k := range o {
				if strings.HasSuffix(k, "_at") || k == "at" {
					o[k] = value
				}
			}
		}
	}
}

// TestRestoreRefusesImpossibleRows: each document is refused, for a
// convo_admin login, with CV011 whose DETAIL names the key and the row, and
// writes nothing; the good document restores.
func TestRestoreRefusesImpossibleRows(t *testing.T) {
	t.Parallel()
	src := newDB(t)
	exportTools(t, src)
	conv := exportStory(t, src, "owner-1")
	mustExec(t, src, `SELECT convo.set_title($1, 'Credits')`, conv)
	mustExec(t, src, `SELECT convo.archive_conversation($1)`, conv)
	doc := exportAs(t, src, "", conv)
	edit := func(f func(x map[string]any)) string { return editExport(t, doc, f) }
	conversation := func(x map[string]any) map[string]any { return x["conversation"].(map[string]any) }
	completed := func(x map[string]any) map[string]any { return docRow(t, x, "generations", "state", "completed") }
	last := func(x map[string]any) map[string]any { m := rows(x, "messages"); return m[len(m)-1] }
	cases := []struct {
		name, doc string
		mentions  []string
	}{
		{"last activity 27 years before the conversation", edit(func(x map[string]any) {
			c := conversation(x)
			created, err := time.Parse(time.RFC3339Nano, c["created_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			c["last_activity_at"] = created.AddDate(-27, 0, 0).Format(time.RFC3339Nano)
		}), []string{"conversation: last activity", "before the conversation"}},
		{"created at -infinity", edit(func(x map[string]any) {
			conversation(x)["created_at"] = "-infinity"
		}), []string{"conversation: created_at -infinity"}},
		{"every time -infinity", edit(func(x map[string]any) { setTimes(x, "-infinity") }),
			[]string{"conversation: created_at -infinity"}},
		{"every time infinity", edit(func(x map[string]any) { setTimes(x, "infinity") }),
			[]string{"conversation: created_at infinity"}},
		{"a message at infinity", edit(func(x map[string]any) { last(x)["created_at"] = "infinity" }),
			[]string{"messages: message", "created_at infinity"}},
		{"an effect event at -infinity", edit(func(x map[string]any) { rows(x, "effect_events")[0]["at"] = "-infinity" }),
			[]string{"effect_events: event seq", "-infinity"}},
		{"every time NULL", edit(func(x map[string]any) { setTimes(x, nil) }),
			[]string{"conversation: created_at none"}},
		{"last activity NULL", edit(func(x map[string]any) { conversation(x)["last_activity_at"] = nil }),
			[]string{"conversation: last_activity_at none"}},
		{"an effect settled in 2099", edit(func(x map[string]any) {
			docRow(t, x, "effects", "state", "compensated")["settled_at"] = "2099-01-01T00:00:00+00:00"
		}), []string{"effects: effect", "settled at 2099", "after the import"}},
		{"an effect settled when it was confirmed, before its settling event's turn", edit(func(x map[string]any) {
			e := docRow(t, x, "effects", "confirmed_by", "bob")
			e["settled_at"] = e["confirmed_at"]
		}), []string{"effects: effect", "settled at", "not between event seq"}},
		{"an effect confirmed before it was requested", edit(func(x map[string]any) {
			e := docRow(t, x, "effects", "confirmed_by", "bob")
			requested, err := time.Parse(time.RFC3339Nano, e["requested_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			e["confirmed_at"] = requested.Add(-time.Hour).Format(time.RFC3339Nano)
		}), []string{"effects: effect", "confirmed at", "before it was requested"}},
		{"an effect no call of the export created", edit(func(x map[string]any) {
			dropRows(x, "tool_calls", "tool_call_id", "call_4")
		}), []string{"effects: effect", "0 creating calls"}},
		{"a change with no seq", edit(func(x map[string]any) { rows(x, "changes")[0]["seq"] = nil }),
			[]string{"changes: row 1 of the array has no seq"}},
		{"a head-log row with no seq", edit(func(x map[string]any) { rows(x, "head_log")[1]["seq"] = nil }),
			[]string{"head_log: row 2 of the array has no seq"}},
		{"an effect event with no seq", edit(func(x map[string]any) { rows(x, "effect_events")[0]["seq"] = nil }),
			[]string{"effect_events: row 1 of the array has no seq"}},
		{"a message's sibling_index changed", edit(func(x map[string]any) {
			rows(x, "messages")[2]["sibling_index"] = json.Number("7")
		}), []string{"messages: message " + rows(decodeExport(t, doc), "messages")[2]["id"].(string) + " has sibling_index 7"}},
		{"a message's branch_id changed", edit(func(x map[string]any) {
			rows(x, "messages")[2]["branch_id"] = newID()
		}), []string{"key messages, row 3 of the array (id " + rows(decodeExport(t, doc), "messages")[2]["id"].(string) + "), field branch_id"}},
		{"the conversation's title changed", edit(func(x map[string]any) {
			conversation(x)["title"] = "Other"
		}), []string{"changes: the log leaves the title Credits (row seq 1), the conversation holds Other"}},
		{"a generation with no model", edit(func(x map[string]any) { completed(x)["model"] = nil }),
			[]string{"generations row", "(id " + docRow(t, decodeExport(t, doc), "generations", "state", "completed")["id"].(string) + ")",
				"table generations", "column model"}},
		{"a failed generation with no error code", edit(func(x map[string]any) {
			docRow(t, x, "generations", "state", "failed")["error_code"] = nil
		}), []string{"generations row", "(id " + docRow(t, decodeExport(t, doc), "generations", "state", "failed")["id"].(string) + ")",
			"constraint generations_check3"}},
		{"a tool call with an unknown decision", edit(func(x map[string]any) {
			docRow(t, x, "tool_calls", "tool_call_id", "call_3")["decision"] = "maybe"
		}), []string{"tool_calls row", "(call call_3)"}},
		{"a tool call renamed", edit(func(x map[string]any) {
			docRow(t, x, "tool_calls", "tool_call_id", "call_3")["tool_call_id"] = "call_forged"
		}), []string{"tool_calls: call call_forged links part", "which is not its tool_use"}},
		{"a tool call at another part of its message", edit(func(x map[string]any) {
			docRow(t, x, "tool_calls", "tool_call_id", "call_3")["ordinal"] = json.Number("0")
		}), []string{"tool_calls: call call_3 links part 0", "which is not its tool_use"}},
		{"a confirmation whose event is by another", edit(func(x map[string]any) {
			id := docRow(t, x, "effects", "confirmed_by", "bob")["id"]
			for _, v := range rows(x, "effect_events") {
				if v["effect_id"] == id && v["from_state"] == "awaiting_confirmation" {
					v["actor"] = "mallory"
				}
			}
		}), []string{"effect_events: effect", "was confirmed by bob", "says mallory"}},
		{"a confirmation by nobody", edit(func(x map[string]any) {
			e := docRow(t, x, "effects", "confirmed_by", "bob")
			e["confirmed_by"] = ""
			for _, v := range rows(x, "effect_events") {
				if v["effect_id"] == e["id"] && v["from_state"] == "awaiting_confirmation" {
					v["actor"] = ""
				}
			}
		}), []string{"effect_events: effect", "was confirmed by nobody"}},
		{"a completed generation that started when it finished", edit(func(x map[string]any) {
			g := completed(x)
			g["started_at"] = g["finished_at"]
		}), []string{"generations: generation", "created before it started"}},
		{"a generation begun at a head created after it started", edit(func(x map[string]any) {
			g := completed(x)
			g["head_at_begin"] = last(x)["id"]
		}), []string{"generations: generation", "began at head", "created after it started"}},
		{"a ledger call on a message marked imported from another product", edit(func(x map[string]any) {
			call := docRow(t, x, "tool_calls", "tool_call_id", "call_1")
			imp := newID()
			x["imports"] = append(rows(x, "imports"), map[string]any{"id": imp, "owner_id": "owner-1", "format": "chatgpt",
				"source_key": "forged", "digest": "forged", "imported_by": "someone",
				"imported_at": conversation(x)["last_activity_at"], "import_id": nil})
			docRow(t, x, "messages", "id", call["message_id"])["import_id"] = imp
			x["origins"] = append(rows(x, "origins"), map[string]any{"message_id": call["message_id"], "source": "chatgpt",
				"node_key": "forged-1", "node": map[string]any{"id": "forged-1"}, "import_id": nil})
		}), []string{"tool_calls: call call_1 is of message", "imported from chatgpt"}},
		{"a currency its column cannot hold", edit(func(x map[string]any) {
			docRow(t, x, "effects", "state", "applied")["currency"] = "EURO"
		}), []string{"effects row", "(id " + docRow(t, decodeExport(t, doc), "effects", "state", "applied")["id"].(string) + ")"}},
		{"a tool deadline that is no interval", edit(func(x map[string]any) {
			rows(x, "tools")[0]["deadline"] = "PT20Sx"
		}), []string{"tools row 1 of the array (name " + rows(decodeExport(t, doc), "tools")[0]["name"].(string) + ")"}},
		{"an effect's deadline not its tool's after its request", edit(func(x map[string]any) {
			docRow(t, x, "effects", "state", "applied")["deadline_at"] = "2001-01-01T00:00:00Z"
		}), []string{"effects: effect " + docRow(t, decodeExport(t, doc), "effects", "state", "applied")["id"].(string), "not its tool's deadline"}},
		{"a tool call at a negative part, which jsonb counts from the end", edit(func(x map[string]any) {
			docRow(t, x, "tool_calls", "tool_call_id", "call_3")["ordinal"] = json.Number("-1")
		}), []string{"tool_calls: call call_3 links part -1", "which is not its tool_use"}},
		{"the creating call of an effect said reuse", edit(func(x map[string]any) {
			docRow(t, x, "tool_calls", "tool_call_id", "call_4")["decision"] = "reuse"
		}), []string{"effects: effect", "0 creating calls"}},
		{"a confirmed re-run's creating call said rejected", edit(func(x map[string]any) {
			docRow(t, x, "tool_calls", "decision", "confirm")["decision"] = "rejected"
		}), []string{"tool_calls: call", "decided rejected, but its effect", "is no rejection"}},
		{"a first child with a branch reason", edit(func(x map[string]any) {
			rows(x, "messages")[1]["branch_reason"] = "branch"
		}), []string{"messages: message " + rows(decodeExport(t, doc), "messages")[1]["id"].(string), "branch_reason branch"}},
		{"a later sibling with no branch reason", edit(func(x map[string]any) {
			for _, m := range rows(x, "messages") {
				if m["branch_reason"] != nil {
					m["branch_reason"] = nil
					break
				}
			}
		}), []string{"messages: message", "branch_reason none, its place among its siblings is 2"}},
		{"a head log begun by an import the document does not hold", edit(func(x map[string]any) {
			rows(x, "head_log")[0]["reason"] = "import"
		}), []string{"head_log: row seq 1 has reason import", "no import"}},
		{"a tool call twice", edit(func(x map[string]any) {
			x["tool_calls"] = append(x["tool_calls"].([]any), docRow(t, x, "tool_calls", "tool_call_id", "call_3"))
		}), []string{"tool_calls: call call_3 appears twice"}},
		{"a generation twice", edit(func(x map[string]any) {
			x["generations"] = append(x["generations"].([]any), completed(x))
		}), []string{"generations: generation", "appears twice"}},
		{"a completed generation answered by its own prompt", edit(func(x map[string]any) {
			g := completed(x)
			g["message_id"] = g["prompt_message_id"]
		}), []string{"generations: generation", "not an assistant answer to its prompt"}},
		{"a completed generation answered by an assistant message elsewhere", edit(func(x map[string]any) {
			g := completed(x)
			for _, m := range rows(x, "messages") {
				if m["role"] == "assistant" && m["parent_id"] != g["prompt_message_id"] {
					g["message_id"] = m["id"]
					break
				}
			}
		}), []string{"generations: generation", "not an assistant answer to its prompt"}},
		{"an origin with no import of its format, dated 2099", edit(func(x map[string]any) {
			m := last(x)
			m["created_at"] = "2099-01-01T00:00:00+00:00"
			x["origins"] = []any{map[string]any{"message_id": m["id"], "source": "chatgpt", "node_key": "n1", "node": map[string]any{}}}
		}), []string{"origins: the origin of message", "no import of format chatgpt"}},
		{"an origin on a message written here, in a document with an import of its format", edit(func(x map[string]any) {
			c := conversation(x)
			m := last(x)
			x["origins"] = []any{map[string]any{"message_id": m["id"], "source": "chatgpt", "node_key": "n1", "node": map[string]any{}}}
			x["imports"] = []any{map[string]any{"id": newID(), "owner_id": "owner-1", "format": "chatgpt", "source_key": "s1",
				"digest": nil, "imported_by": "web", "imported_at": c["last_activity_at"], "import_id": nil}}
		}), []string{"origins: the origin of message", "names import none"}},
		{"an imported message dated after its import", edit(func(x map[string]any) {
			c := conversation(x)
			m := last(x)
			imp := newID()
			m["created_at"], m["import_id"] = "2099-01-01T00:00:00+00:00", imp
			x["origins"] = []any{map[string]any{"message_id": m["id"], "source": "chatgpt", "node_key": "n1", "node": map[string]any{}}}
			x["imports"] = []any{map[string]any{"id": imp, "owner_id": "owner-1", "format": "chatgpt", "source_key": "s1",
				"digest": nil, "imported_by": "web", "imported_at": c["created_at"], "import_id": nil}}
		}), []string{"messages: message", "2099", "after the import"}},
	}
	// One database for every case: each restores in a transaction of its
	// own that is rolled back, so a document wrongly accepted does not
	// stand in the way of the next, and the database ends as it began.
	dst := newDB(t)
	exportTools(t, dst)
	admin := loginAs(t, dst, "convo_admin")
	before := fingerprint(t, dst)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err, good := restoreRolledBack(t, admin, "owner-1", c.doc, doc)
			requireSQLState(t, err, "CV011")
			detail := pgError(t, err).Detail
			for _, m := range c.mentions {
				if !strings.Contains(detail, m) {
					t.Errorf("DETAIL %q does not name %q", detail, m)
				}
			}
			if good != nil {
				t.Fatalf("the good document after it: %v", good)
			}
		})
	}
	requireFingerprint(t, dst, "the refused restores, rolled back", before)
	if _, err := importAs(admin, "owner-1", "conversation", doc); err != nil {
		t.Fatalf("the good document: %v", err)
	}
	requireEqual(t, "failing checks after the restore", failingChecks(t, dst), "")
}

// restoreRolledBack restores bad, then good, as owner through pool, in one
// transaction that it rolls back: bad in a savepoint, rolled back to after
// it (a refused statement writes nothing), good after it. It returns each
// restore's error.
func restoreRolledBack(t testing.TB, pool *pgxpool.Pool, owner, bad, good string) (badErr, goodErr error) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	restore := func(doc string) error {
		var id string
		return tx.QueryRow(ctx, `SELECT `+importFn("conversation")+`($1, $2::jsonb)::text`, owner, doc).Scan(&id)
	}
	for _, stmt := range []string{`SELECT set_config('convo.owner_id', '` + owner + `', true)`, `SAVEPOINT bad`} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	badErr = restore(bad)
	if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT bad`); err != nil {
		t.Fatal(err)
	}
	return badErr, restore(good)
}

// TestMoveHeadReservesImport: 'import' begins an imported conversation's
// head log only, so move_head refuses it, as it does create and
// direct_update, for a convo_app login: CV011, nothing written.
func TestMoveHeadReservesImport(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "")
	first := appendMsg(t, db, conv, "user", textParts("One."))
	appendMsg(t, db, conv, "assistant", textParts("Two."))
	app := loginAs(t, db, "convo_app")
	for _, reason := range []string{"import", "create", "direct_update"} {
		before := fingerprint(t, db)
		err := asOwner(app, "owner-1", `SELECT convo.move_head($1, $2, $3)`, conv, first, reason)
		requireSQLState(t, err, "CV011")
		requireFingerprint(t, db, "the refused move to "+reason, before)
	}
}

// futureSources is each importer's fixture with every source time set to
// 2100-01-01 (ChatGPT's create_time and update_time, Open WebUI's
// timestamp, LibreChat's createdAt and updatedAt), and the value each
// source node keeps.
func futureSources(t testing.TB) map[string][2]string {
	t.Helper()
	read := func(file string) any {
		b, err := os.ReadFile(filepath.Join(fixtureDir, file))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var set func(v any, keys map[string]any)
	set = func(v any, keys map[string]any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if to, ok := keys[k]; ok && x != nil {
					v[k] = to
				} else {
					set(x, keys)
				}
			}
		case []any:
			for _, x := range v {
				set(x, keys)
			}
		}
	}
	epoch := json.Number("4102444800") // 2100-01-01T00:00:00Z
	iso := "2100-01-01T00:00:00.000Z"
	chatgpt := read("chatgpt-conversations.json").([]any)[0]
	set(chatgpt, map[string]any{"create_time": epoch, "update_time": epoch})
	openwebui := read("openwebui-chat.json")
	set(openwebui, map[string]any{"timestamp": epoch})
	librechat := read("librechat-flat.json")
	set(librechat, map[string]any{"createdAt": iso, "updatedAt": iso})
	return map[string][2]string{
		"chatgpt":   {encodeJSON(t, chatgpt), "4102444800"},
		"openwebui": {encodeJSON(t, openwebui), "4102444800"},
		"librechat": {encodeJSON(t, librechat), iso},
	}
}

// TestImportOfAFutureSourceRestores: each importer, given a source dated
// 2100, dates the messages and the conversation at the import's time (its
// record's, or before), keeps the source's time in each origin's node, and
// the conversation's export restores into a second database, exporting the
// same document there.
func TestImportOfAFutureSourceRestores(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	web := loginAs(t, src, "convo_app")
	admin := loginAs(t, dst, "convo_admin")
	for format, s := range futureSources(t) {
		t.Run(format, func(t *testing.T) {
			conv := mustImport(t, web, "owner-1", format, s[0])
			requireCount(t, src, 0, `SELECT count(*) FROM convo.messages m JOIN convo.imports i ON i.id = m.import_id
				WHERE m.conversation_id = $1 AND m.created_at > i.imported_at`, conv)
			requireCount(t, src, 0, `SELECT count(*) FROM convo.conversations c JOIN convo.imports i ON i.conversation_id = c.id
				WHERE c.id = $1 AND (c.created_at > i.imported_at OR c.last_activity_at > i.imported_at)`, conv)
			if n := queryRow[int64](t, src, `SELECT count(*) FROM convo.import_origins o
				WHERE o.conversation_id = $1 AND strpos(o.node::text, $2) > 0`, conv, s[1]); n == 0 {
				t.Fatalf("no origin keeps the source's time %s", s[1])
			}
			doc := exportAs(t, src, "", conv)
			if _, err := importAs(admin, "owner-1", "conversation", doc); err != nil {
				t.Fatalf("restore: %v", err)
			}
			requireEqual(t, "the export of the restored conversation", restoredDoc(t, exportAs(t, dst, "", conv)), restoredDoc(t, doc))
		})
	}
	requireEqual(t, "failing checks after the restores", failingChecks(t, dst), "")
}

// TestRestoreRetriedWhileTheFirstIsOpen: a restore retried while the first
// is still in its open transaction waits for it, and once it commits
// returns the same id and writes nothing (its own transaction, read before
// it commits and after, holds the same rows).
func TestRestoreRetriedWhileTheFirstIsOpen(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)
	ctx := context.Background()
	first := openOwnerTx(t, loginAs(t, dst, "convo_admin"), "owner-1")
	var id string
	if err := first.QueryRow(ctx, `SELECT convo.import_conversation('owner-1', $1::jsonb)::text`, doc).Scan(&id); err != nil {
		t.Fatalf("the first restore: %v", err)
	}
	second := openOwnerTx(t, loginAs(t, dst, "convo_admin"), "owner-1")
	pid := second.Conn().PgConn().PID()
	type result struct {
		id  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = second.QueryRow(ctx, `SELECT convo.import_conversation('owner-1', $1::jsonb)::text`, doc).Scan(&r.id)
		done <- r
	}()
	waitForLock(t, dst, pid)
	if err := first.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the retried restore: %v", r.err)
	}
	requireEqual(t, "the retry's id", r.id, conv)
	before := fingerprint(t, dst)
	if err := second.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	requireFingerprint(t, dst, "the retried restore", before)
	requireCount(t, dst, 1, `SELECT count(*) FROM convo.imports WHERE conversation_id = $1 AND format = 'pgconvo'`, conv)
}

// waitForLock returns once backend pid waits for a lock, polling up to
// 3000 times (a generous bound on a busy machine, counted, not timed), and
// fails saying so when it never does.
func waitForLock(t testing.TB, db *pgxpool.Pool, pid uint32) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		if queryRow[int64](t, db, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, int64(pid)) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("backend %d was not seen waiting for a lock in 3000 looks", pid)
}

// openOwnerTx begins a transaction on pool that names owner, rolled back
// at the end of the test unless committed.
func openOwnerTx(t testing.TB, pool *pgxpool.Pool, owner string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestRestoreNamesTheErasureThatMissedContent: a conversation erased twice,
// with a message written between the erasures; that message's text put
// back in the export is refused against the second erasure (the first
// erasure is before it), the conversation's metadata put back against the
// first; each CV011 writes nothing, and the export itself restores.
func TestRestoreNamesTheErasureThatMissedContent(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	conv := queryRow[string](t, src, `SELECT convo.create_conversation('owner-1', 'You help.', '{"plan": "pro"}')::text`)
	appendMsg(t, src, conv, "user", textParts("First secret."))
	mustExec(t, src, `SELECT * FROM convo.erase_conversation($1, 'first')`, conv)
	between := appendMsg(t, src, conv, "user", textParts("Second secret."))
	mustExec(t, src, `SELECT * FROM convo.erase_conversation($1, 'second')`, conv)
	appendMsg(t, src, conv, "user", textParts("Kept."))
	doc := exportAs(t, src, "", conv)
	x := decodeExport(t, doc)
	first, second := rows(x, "erasures")[0]["id"].(string), rows(x, "erasures")[1]["id"].(string)
	admin := loginAs(t, dst, "convo_admin")
	places := func(x map[string]any) []any { return rows(x, "erasures")[0]["places"].([]any) }
	for _, c := range []struct {
		name, doc string
		mentions  []string
	}{
		{"a place twice", editExport(t, doc, func(x map[string]any) {
			r := rows(x, "erasures")[0]
			r["places"] = append(places(x), places(x)[0])
		}), []string{"erasures: erasure " + first, "appears twice"}},
		{"a place counting no row", editExport(t, doc, func(x map[string]any) {
			places(x)[0].(map[string]any)["rows_redacted"] = json.Number("0")
		}), []string{"erasures: erasure " + first, "counts 0 rows"}},
		{"a place counting NULL rows", editExport(t, doc, func(x map[string]any) {
			places(x)[0].(map[string]any)["rows_redacted"] = nil
		}), []string{"erasures: erasure " + first, "counts no rows"}},
		{"the message between them unredacted", editExport(t, doc, func(x map[string]any) {
			docRow(t, x, "messages", "id", between)["parts"] = []any{map[string]any{"type": "text", "text": "Second secret."}}
		}), []string{"erasures: erasure " + second, "message " + between + ", created before it, is not redacted"}},
		{"the metadata unredacted", editExport(t, doc, func(x map[string]any) {
			x["conversation"].(map[string]any)["metadata"] = map[string]any{"plan": "pro"}
		}), []string{"erasures: erasure " + first, "metadata is not redacted"}},
	} {
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
	if _, err := importAs(admin, "owner-1", "conversation", doc); err != nil {
		t.Fatalf("the export: %v", err)
	}
}

// TestErasedImportRestores: a ChatGPT and an Open WebUI import holding
// attachments, erased (each attachment's uri emptied), export and restore
// into a second database, exporting the same document there; the erased
// attachment form is refused where no erasure of the document covers it.
func TestErasedImportRestores(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	web := loginAs(t, src, "convo_app")
	admin := loginAs(t, dst, "convo_admin")
	read := func(file string, i int) string {
		b, err := os.ReadFile(filepath.Join(fixtureDir, file))
		if err != nil {
			t.Fatal(err)
		}
		var v []any
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return encodeJSON(t, v[i])
	}
	var last string
	for _, c := range []struct{ format, file string }{{"chatgpt", "chatgpt-conversations.json"}, {"openwebui", "openwebui-export.json"}} {
		conv := mustImport(t, web, "owner-1", c.format, read(c.file, 0))
		if !queryRow[bool](t, src, `SELECT count(*) > 0 FROM convo.messages m, jsonb_array_elements(m.parts) p
			WHERE m.conversation_id = $1 AND p ->> 'type' = 'attachment'`, conv) {
			t.Fatalf("the %s fixture holds no attachment", c.format)
		}
		mustExec(t, src, `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`, conv)
		doc := exportAs(t, src, "", conv)
		if _, err := importAs(admin, "owner-1", "conversation", doc); err != nil {
			t.Fatalf("restoring the erased %s import: %v", c.format, err)
		}
		requireEqual(t, "the export of the restored "+c.format+" import", restoredDoc(t, exportAs(t, dst, "", conv)), restoredDoc(t, doc))
		last = doc
	}
	requireEqual(t, "failing checks after the restores", failingChecks(t, dst), "")

	// The same erased form with no erasure in the document: the API never
	// wrote it.
	fresh := newDB(t)
	before := fingerprint(t, fresh)
	_, err := importAs(loginAs(t, fresh, "convo_admin"), "owner-1", "conversation", editExport(t, last, func(x map[string]any) {
		x["erasures"] = []any{}
	}))
	requireSQLState(t, err, "CV011")
	if d := pgError(t, err).Detail; !strings.Contains(d, "holds an erased attachment") {
		t.Errorf("DETAIL %q does not name the erased attachment", d)
	}
	requireFingerprint(t, fresh, "the refused restore", before)
}
