package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// mergeNode is one ChatGPT node of the merge attack tests: its key, its
// parent's key ("" under the message-less root), role, text and time.
type mergeNode struct {
	key, parent, role, text string
	at                      float64
}

// mergeDoc writes nodes as a ChatGPT conversation with source id src under
// a message-less root, its current_node head.
func mergeDoc(t testing.TB, src, head string, nodes []mergeNode) string {
	t.Helper()
	children := map[string][]any{}
	for _, n := range nodes {
		p := n.parent
		if p == "" {
			p = "root"
		}
		children[p] = append(children[p], n.key)
	}
	kids := func(k string) []any {
		if c := children[k]; c != nil {
			return c
		}
		return []any{}
	}
	mapping := map[string]any{"root": map[string]any{"id": "root", "parent": nil, "message": nil, "children": kids("root")}}
	for _, n := range nodes {
		p := n.parent
		if p == "" {
			p = "root"
		}
		mapping[n.key] = map[string]any{"id": n.key, "parent": p, "children": kids(n.key), "message": map[string]any{
			"author": map[string]any{"role": n.role}, "create_time": n.at,
			"content": map[string]any{"content_type": "text", "parts": []any{n.text}}}}
	}
	return encodeJSON(t, map[string]any{"id": src, "title": "Merge", "create_time": 50, "current_node": head, "mapping": mapping})
}

// TestImportMergeHeadIsTheLatestNamed: whatever the node keys (so whatever
// order the source's keys sort in against the messages' order), a merge
// moves the head to the import's only when the import's is later, and two
// imports in either order end at the same head, the later of the two they
// named; each merge logs a head move only when it moved, and self_check
// stays clean. (The import's head time was read at a node's position used
// as a message's: one merge kept an earlier head, the other moved the head
// back to an earlier message, and the two orders ended apart.)
func TestImportMergeHeadIsTheLatestNamed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		first, second string
		want          string // the node key of the head at the end
	}{
		{
			// The second adds a later answer and names it: the head moves.
			name:   "a later head is taken",
			first:  mergeDoc(t, "head-src", "z2", []mergeNode{{"z1", "", "user", "Q", 100}, {"z2", "z1", "assistant", "A", 200}}),
			second: mergeDoc(t, "head-src", "a3", []mergeNode{{"z1", "", "user", "Q", 100}, {"z2", "z1", "assistant", "A", 200}, {"a3", "z1", "assistant", "A again", 300}}),
			want:   "a3",
		},
		{
			// The second names an earlier answer (and adds a later leaf it
			// does not name): the head stays.
			name:   "an earlier head is not taken",
			first:  mergeDoc(t, "head-src", "b5", []mergeNode{{"b1", "", "user", "Q", 100}, {"b5", "b1", "assistant", "A", 500}}),
			second: mergeDoc(t, "head-src", "c0", []mergeNode{{"b1", "", "user", "Q", 100}, {"b5", "b1", "assistant", "A", 500}, {"b2", "b5", "user", "More", 900}, {"c0", "b1", "assistant", "Other", 200}}),
			want:   "b5",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			web := loginAs(t, db, "convo_app")
			for i, order := range [][2]string{{c.first, c.second}, {c.second, c.first}} {
				owner := []string{"alice", "bob"}[i]
				conv := mustImport(t, web, owner, "chatgpt", order[0])
				requireEqual(t, "the merge's conversation", mustImport(t, web, owner, "chatgpt", order[1]), conv)
				requireEqual(t, owner+"'s head", queryRow[string](t, db, `SELECT o.node_key FROM convo.conversations c
					JOIN convo.import_origins o ON o.conversation_id = c.id AND o.message_id = c.head_message_id
					WHERE c.id = $1`, conv), c.want)
				moves := queryRow[int64](t, db, `SELECT count(*) FROM convo.head_history($1)`, conv)
				if moves < 1 || moves > 2 {
					t.Fatalf("%s: %d head moves after two imports", owner, moves)
				}
			}
			requireEqual(t, "self_check", failingChecks(t, db), "")
		})
	}
}

// chainNodes is a linear chat of n turns, keys and texts prefixed with
// tag, times from t0 a second apart, hanging under parent ("": a root).
func chainNodes(tag, parent string, n int, t0 float64) []mergeNode {
	out := make([]mergeNode, n)
	for i := range out {
		out[i] = mergeNode{fmt.Sprintf("%s%05d", tag, i), parent, []string{"user", "assistant"}[i%2], fmt.Sprintf("%s turn %d", tag, i), t0 + float64(i)}
		parent = out[i].key
	}
	return out
}

// TestImportMergeCostIsLinear: a merge of n new messages (a chain under
// the conversation's first message, so each new one is the first child of
// its parent in the import and its branch reason is looked up among the
// stored) into a conversation of n reads a number of rows linear in n:
// doubling n at most about doubles the rows the merge's transaction read
// (pg_stat_xact_user_tables), where a lookup that read the whole
// conversation for each new message made them grow fourfold. Rows read,
// not time: the count is the same on a busy machine. Each size has a
// database of its own whose tables autovacuum leaves alone, so neither the
// other size's rows nor an ANALYZE landing mid-run (which changes the plan
// of the merge's lookups: once, under load, 800 into 800 read 648,824 rows)
// changes what is read; the planner sees tables never analyzed, as a
// database does right after a bulk import.
func TestImportMergeCostIsLinear(t *testing.T) {
	t.Parallel()
	rowsRead := func(n int) int64 {
		db := newDB(t)
		mustExec(t, db, `DO $$
			DECLARE r regclass;
			BEGIN
			    FOR r IN SELECT c.oid FROM pg_class c WHERE c.relkind = 'r'
			              AND c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) LOOP
			        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', r);
			    END LOOP;
			END $$`)
		web := loginAs(t, db, "convo_app")
		owner := fmt.Sprintf("owner-%d", n)
		base := chainNodes("a", "", n, 1000)
		more := chainNodes("b", base[0].key, n, 100000)
		conv := mustImport(t, web, owner, "chatgpt", mergeDoc(t, "cost-src", base[n-1].key, base))
		// One connection: its counts of what earlier transactions read are
		// flushed first (pg_stat_xact_user_tables shows them until then).
		ctx := context.Background()
		conn, err := web.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		var read int64
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var id string
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT convo.import_chatgpt($1, $2::jsonb)::text`, owner,
				mergeDoc(t, "cost-src", more[n-1].key, append([]mergeNode{base[0]}, more...))).Scan(&id); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT sum(seq_tup_read + coalesce(idx_tup_fetch, 0))::bigint FROM pg_stat_xact_user_tables
			                          WHERE schemaname IN ('convo', 'convo_private')`).Scan(&read)
		})
		if err != nil {
			t.Fatalf("merging %d into %d: %v", n, n, err)
		}
		requireEqual(t, "messages after the merge", queryRow[int64](t, db, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, conv), int64(2*n))
		return read
	}
	small, large := rowsRead(400), rowsRead(800)
	t.Logf("rows read merging 400 into 400: %d; 800 into 800: %d (%.2fx)", small, large, float64(large)/float64(small))
	if float64(large) > 2.5*float64(small) {
		t.Fatalf("merging 800 into 800 read %d rows, 400 into 400 %d: %.2fx, want about 2x (linear)", large, small, float64(large)/float64(small))
	}
}

// mergedStory imports a chat as owner-1, appends an answer through the API
// (the head), then merges a later export of the chat whose new head is
// dated ahead of the import (so it is the import's time, later than the
// appended answer): three head moves, import, append, import.
func mergedStory(t testing.TB, db *pgxpool.Pool) string {
	t.Helper()
	web := loginAs(t, db, "convo_app")
	first := []mergeNode{{"q1", "", "user", "Q", 100}, {"a1", "q1", "assistant", "A", 200}}
	conv := mustImport(t, web, "owner-1", "chatgpt", mergeDoc(t, "story-src", "a1", first))
	appendMsg(t, db, conv, "user", textParts("Asked here"))
	mustImport(t, web, "owner-1", "chatgpt", mergeDoc(t, "story-src", "q2",
		append(first, mergeNode{"q2", "a1", "user", "Asked there", 4e9})))
	requireSlice(t, "head moves", queryRowsAs[string](t, db, `SELECT reason FROM convo.head_history($1) ORDER BY seq`, conv),
		[]string{"import", "append", "import"})
	return conv
}

// TestExportRoundTripOfAMergedConversation: a conversation an import
// created, the API went on and a merge extended (with its own import record
// and head move) restores into a fresh database row for row, exports the
// same again, and self_check is clean; and a restore refuses (CV011,
// writing nothing) a document whose merge history lies: the merge's head
// move at a message no import wrote, or naming the first import for the
// second's message.
func TestExportRoundTripOfAMergedConversation(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	conv := mergedStory(t, src)
	requireEqual(t, "import records", queryRow[int64](t, src, `SELECT count(*) FROM convo.imports WHERE conversation_id = $1`, conv), int64(2))
	doc := exportAs(t, src, "", conv)
	admin := loginAs(t, dst, "convo_admin")

	var imports []map[string]any
	var appended, merged string
	editExport(t, doc, func(x map[string]any) {
		for _, r := range x["imports"].([]any) {
			imports = append(imports, r.(map[string]any))
		}
		for _, r := range x["messages"].([]any) {
			m := r.(map[string]any)
			if m["import_id"] == nil {
				appended = m["id"].(string)
			} else if m["created_at"] != nil && strings.HasPrefix(m["created_at"].(string), "2") && m["parent_id"] != nil && m["role"] == "user" && m["depth"].(json.Number).String() == "2" {
				merged = m["id"].(string)
			}
		}
	})
	if len(imports) != 2 || appended == "" || merged == "" {
		t.Fatalf("the export: %d import records, appended %q, merged %q", len(imports), appended, merged)
	}
	sort.Slice(imports, func(i, j int) bool { return imports[i]["imported_at"].(string) < imports[j]["imported_at"].(string) })
	firstImport := imports[0]["id"].(string)

	before := fingerprint(t, dst)
	for _, c := range []struct {
		name string
		edit func(x map[string]any)
	}{
		{"the merge's message named as the first import's", func(x map[string]any) {
			for _, r := range x["messages"].([]any) {
				if m := r.(map[string]any); m["id"] == merged {
					m["import_id"] = firstImport
				}
			}
		}},
		{"the API's head move told as the merge's", func(x map[string]any) {
			for _, r := range x["head_log"].([]any) {
				if l := r.(map[string]any); l["head_message_id"] == appended {
					l["reason"], l["import_id"] = "import", imports[1]["id"]
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := importAs(admin, "owner-1", "conversation", editExport(t, doc, c.edit))
			requireSQLState(t, err, "CV011")
			requireFingerprint(t, dst, c.name, before)
		})
	}

	if _, err := importAs(admin, "owner-1", "conversation", doc); err != nil {
		t.Fatalf("restoring the merged conversation: %v", err)
	}
	requireSameRows(t, conv, conversationRows(t, src, conv, assigned...), conversationRows(t, dst, conv, assigned...))
	requireEqual(t, "the export of the restored conversation", restoredDoc(t, exportAs(t, dst, "", conv)), restoredDoc(t, doc))
	requireEqual(t, "self_check of the source", failingChecks(t, src), "")
	requireEqual(t, "self_check of the restore", failingChecks(t, dst), "")
}

// TestImportMergeBranchReasonsByTheFirstStored: a merge's new sibling takes
// its branch reason from the first sibling stored (docs/importing.md), also
// when the import held another stored sibling before it: a user message
// after a stored assistant answer and a user edit is a branch, not a
// user_edit of the edit. In either order, every later sibling's reason is
// by the first one's role.
func TestImportMergeBranchReasonsByTheFirstStored(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	one := mergeDoc(t, "reason-src", "a", []mergeNode{{"q", "", "user", "Q", 100}, {"z", "q", "assistant", "Z", 200}, {"a", "q", "user", "A", 300}})
	two := mergeDoc(t, "reason-src", "b", []mergeNode{{"q", "", "user", "Q", 100}, {"a", "q", "user", "A", 300}, {"b", "q", "user", "B", 400}})
	for i, order := range [][2]string{{one, two}, {two, one}} {
		owner := []string{"alice", "bob"}[i]
		conv := mustImport(t, web, owner, "chatgpt", order[0])
		mustImport(t, web, owner, "chatgpt", order[1])
		requireEqual(t, owner+"'s siblings whose reason is not by the first's role", queryRow[string](t, db, `
			SELECT coalesce(string_agg(o.node_key || ' ' || m.branch_reason, ', '), '')
			  FROM convo.messages m
			  JOIN convo.messages f ON f.conversation_id = m.conversation_id AND f.parent_id IS NOT DISTINCT FROM m.parent_id AND f.sibling_index = 1
			  JOIN convo.import_origins o ON o.conversation_id = m.conversation_id AND o.message_id = m.id
			 WHERE m.conversation_id = $1 AND m.sibling_index > 1
			   AND m.branch_reason <> CASE WHEN m.role = 'user' AND f.role = 'user' THEN 'user_edit'
			                               WHEN m.role = 'assistant' AND f.role = 'assistant' THEN 'regenerate' ELSE 'branch' END`, conv), "")
	}
	requireEqual(t, "self_check", failingChecks(t, db), "")
}
