package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of the three imports (import_chatgpt, import_openwebui,
// import_librechat) on the project's own fixtures (testdata/imports, see its
// README.md), so that a clone with nothing beside it tests them: the tree
// (depths, parents, sibling order, branch reasons, original times), the
// head and its one log row, parts and attachments, message-less nodes and
// source nodes kept verbatim, the documented ids, repeats, and every
// refusal with its SQLSTATE and nothing written. Each import runs as the
// application runs it: a login member of convo_app, in a transaction that
// sets convo.owner_id first (importAs). What each test expects is written
// here by hand from the fixture, not computed from it.

// fixtureDir holds the fixtures, from tests/.
const fixtureDir = "testdata/imports"

// fixturePath is the absolute path of a fixture file (the CLI runs in a
// directory of its own).
func fixturePath(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fixtureDoc is a fixture, decoded with json.Number: "file" for the whole
// file, "file#i" for element i of the array it holds.
func fixtureDoc(t testing.TB, ref string) any {
	t.Helper()
	name, index, indexed := strings.Cut(ref, "#")
	body, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatalf("reading the fixture %s: %v", name, err)
	}
	v := decodeSample(t, body)
	if !indexed {
		return v
	}
	i, err := strconv.Atoi(index)
	list, _ := v.([]any)
	if err != nil || i < 0 || i >= len(list) {
		t.Fatalf("the fixture %s has no element %s", name, index)
	}
	return list[i]
}

// fixtureObject is a fixture that is one object.
func fixtureObject(t testing.TB, ref string) map[string]any {
	t.Helper()
	m, ok := fixtureDoc(t, ref).(map[string]any)
	if !ok {
		t.Fatalf("the fixture %s is not an object", ref)
	}
	return m
}

// fixtureWant is what importing one fixture must write, written by hand.
type fixtureWant struct {
	ref, format string
	source      string // the source key ("": 'sha:' and the keyed digest of the jsonb text)
	// rows: each message as "key dDEPTH PARENT #SIBLING REASON ROLE EPOCH",
	// by depth, then parent key, then sibling index ("-": none).
	rows       []string
	head       string
	path       []string // keys from the root to the head, "key index/count"
	fallback   string   // metadata.import.head_fallback ("": null)
	requested  string   // metadata.import.requested_head ("": null)
	dropped    []string // the message-less nodes' keys
	mismatches int      // metadata.import.children_mismatches
	created    string   // conversations.created_at, epoch seconds
}

// fixtureRows is what the database holds of conv, as fixtureWant.rows.
func fixtureRows(t testing.TB, db *pgxpool.Pool, conv string) []string {
	t.Helper()
	return queryRowsAs[string](t, db, `
		SELECT o.node_key || ' d' || m.depth || ' ' || coalesce(po.node_key, '-') || ' #' || m.sibling_index || ' '
		       || coalesce(m.branch_reason, '-') || ' ' || m.role || ' ' || trim_scale(extract(epoch FROM m.created_at))::text
		  FROM convo.messages m
		  JOIN convo.import_origins o ON o.conversation_id = m.conversation_id AND o.message_id = m.id
		  LEFT JOIN convo.import_origins po ON po.conversation_id = m.conversation_id AND po.message_id = m.parent_id
		 WHERE m.conversation_id = $1
		 ORDER BY m.depth, po.node_key COLLATE "C" NULLS FIRST, m.sibling_index`, conv)
}

// fixtureNodes is the source node each imported message of doc must keep
// verbatim in import_origins, by key: a ChatGPT mapping's node (message
// included), an Open WebUI message, a LibreChat message (a recursive
// export's without its children, which are messages of their own).
func fixtureNodes(t testing.TB, format string, doc map[string]any) map[string]any {
	t.Helper()
	out := map[string]any{}
	switch format {
	case "chatgpt":
		for k, n := range doc["mapping"].(map[string]any) {
			if isObject(n.(map[string]any)["message"]) {
				out[k] = n
			}
		}
	case "openwebui":
		chat := doc
		if c, ok := doc["chat"].(map[string]any); ok {
			chat = c
		}
		for k, m := range chat["history"].(map[string]any)["messages"].(map[string]any) {
			out[k] = m
		}
	case "librechat":
		recursive := doc["recursive"] == true
		var walk func([]any)
		walk = func(list []any) {
			for _, e := range list {
				m := e.(map[string]any)
				kept := map[string]any{}
				for f, v := range m {
					if f != "children" || !recursive {
						kept[f] = v
					}
				}
				out[m["messageId"].(string)] = kept
				if kids, ok := m["children"].([]any); ok && recursive {
					walk(kids)
				}
			}
		}
		walk(doc["messages"].([]any))
	}
	return out
}

// without is a shallow copy of m without keys.
func without(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// requireStoredJSON fails unless the jsonb value query returns equals want (as jsonb).
func requireStoredJSON(t testing.TB, db *pgxpool.Pool, what string, want any, query string, args ...any) {
	t.Helper()
	var got string
	var same bool
	args = append(args, encodeJSON(t, want))
	err := db.QueryRow(context.Background(), `SELECT coalesce(x.v::text, 'SQL NULL'), x.v IS NOT DISTINCT FROM $`+
		strconv.Itoa(len(args))+`::jsonb FROM (`+query+`) x (v)`, args...).Scan(&got, &same)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !same {
		t.Errorf("%s:\n got  %s\n want %s", what, got, encodeJSON(t, want))
	}
}

// requireParts fails unless the parts of the message of conv with node key
// key are want (a JSON array, compared as jsonb) and its role is role.
func requireParts(t testing.TB, db *pgxpool.Pool, conv, key, role, want string) {
	t.Helper()
	var got, gotRole string
	var same bool
	err := db.QueryRow(context.Background(), `SELECT parts::text, role, parts = $3::jsonb FROM convo.messages
		WHERE conversation_id = $1 AND id = (SELECT message_id FROM convo.import_origins WHERE conversation_id = $1 AND node_key = $2)`, conv, key, want).Scan(&got, &gotRole, &same)
	if err != nil {
		t.Fatalf("the parts of %s: %v", key, err)
	}
	if !same || gotRole != role {
		t.Errorf("message %s:\n got  %s %s\n want %s %s", key, gotRole, got, role, want)
	}
}

// importFixture imports want's fixture as owner through web (a convo_app
// login) and checks everything want says, the ids, the head log, the
// import's record and the marks on what it wrote, the source nodes kept
// verbatim, metadata.import, and that a repeat returns the same id and
// writes nothing. It returns the conversation id.
func importFixture(t *testing.T, db, web *pgxpool.Pool, owner string, want fixtureWant) string {
	t.Helper()
	doc := fixtureObject(t, want.ref)
	text := encodeJSON(t, doc)
	conv := mustImport(t, web, owner, want.format, text)
	source := want.source
	if source == "" {
		source = keyedSource(t, db, text)
	}
	requireEqual(t, "conversation id, the keyed digest of [format, owner, source key]", conv, importedID(t, db, want.format, owner, source))
	requireSlice(t, "messages: key, depth, parent, sibling index, branch reason, role, time", fixtureRows(t, db, conv), want.rows)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.messages m JOIN convo.import_origins o
		ON o.conversation_id = m.conversation_id AND o.message_id = m.id
		WHERE m.conversation_id = $1 AND m.id <> ANY (SELECT x.message_id FROM convo.import_origins x
		                                             WHERE x.conversation_id = $1 AND x.node_key = o.node_key)`, conv)
	requireEqual(t, "head", queryRow[string](t, db, `SELECT head_message_id::text FROM convo.conversations WHERE id = $1`, conv),
		nodeID(t, db, conv, want.head))
	requireSlice(t, "path from the root to the head", queryRowsAs[string](t, db, `
		SELECT o.node_key || ' ' || p.sibling_index || '/' || p.sibling_count FROM convo.path($1) p
		  JOIN convo.import_origins o ON o.conversation_id = $1 AND o.message_id = p.message_id ORDER BY p.depth`, conv), want.path)
	requireSlice(t, "head log", queryRowsAs[string](t, db,
		`SELECT reason || ' ' || coalesce(moved_by, '-') FROM convo.head_history($1)`, conv), []string{"import -"})
	requireEqual(t, "conversation time", queryRow[string](t, db,
		`SELECT trim_scale(extract(epoch FROM created_at))::text FROM convo.conversations WHERE id = $1`, conv), want.created)

	// The import's record, and every row it wrote marked with it.
	role := web.Config().ConnConfig.User
	requireSlice(t, "the import's record", queryRowsAs[string](t, db, `SELECT owner_id || ' ' || format || ' ' || source_key || ' '
		|| imported_by || ' ' || (import_id IS NULL) FROM convo.imports WHERE conversation_id = $1`, conv),
		[]string{owner + " " + want.format + " " + source + " " + role + " true"})
	requireCount(t, db, 0, `SELECT count(*) FROM (
		SELECT import_id FROM convo.messages WHERE conversation_id = $1
		UNION ALL SELECT import_id FROM convo.conversation_head_log WHERE conversation_id = $1) x
		WHERE x.import_id IS DISTINCT FROM (SELECT id FROM convo.imports WHERE conversation_id = $1)`, conv)

	// Source nodes verbatim, the message-less ones in metadata.import.
	nodes := fixtureNodes(t, want.format, doc)
	requireCount(t, db, int64(len(nodes)), `SELECT count(*) FROM convo.import_origins WHERE conversation_id = $1`, conv)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.import_origins o WHERE o.conversation_id = $1
		AND (o.source <> $2 OR o.node IS DISTINCT FROM $3::jsonb -> o.node_key)`, conv, want.format, encodeJSON(t, nodes))
	dropped := map[string]any{}
	for _, k := range want.dropped {
		dropped[k] = doc["mapping"].(map[string]any)[k]
	}
	requireStoredJSON(t, db, "metadata.import.dropped_nodes", dropped,
		`SELECT metadata -> 'import' -> 'dropped_nodes' FROM convo.conversations WHERE id = $1`, conv)
	counters := map[string]any{"format": want.format, "source_id": source, "children_mismatches": want.mismatches,
		"head_fallback": nil, "requested_head": nil}
	if want.fallback != "" {
		counters["head_fallback"] = want.fallback
	}
	if want.requested != "" {
		counters["requested_head"] = want.requested
	}
	requireStoredJSON(t, db, "metadata.import's counters", counters, `SELECT jsonb_build_object('format', i -> 'format',
		'source_id', i -> 'source_id', 'children_mismatches', i -> 'children_mismatches',
		'head_fallback', i -> 'head_fallback', 'requested_head', i -> 'requested_head')
		FROM (SELECT metadata -> 'import' AS i FROM convo.conversations WHERE id = $1) x`, conv)

	// No ledger row, generation or receipt.
	requireCount(t, db, 0, `SELECT (SELECT count(*) FROM convo.tool_effects) + (SELECT count(*) FROM convo.tool_effect_calls)
		+ (SELECT count(*) FROM convo.generations) + (SELECT count(*) FROM convo.tool_receipts)`)

	// A repeat: the same id, nothing written.
	before := fingerprint(t, db)
	requireEqual(t, "the repeat's id", mustImport(t, web, owner, want.format, text), conv)
	requireFingerprint(t, db, "the repeat", before)
	return conv
}

// chatgptBranched is what the branched ChatGPT fixture imports to: a root
// and a node midway with no message (kept in metadata.import), a hidden
// system root at the conversation's time, the user profile as a system
// message at its parent's time, an edit (u3, after the gap its answer
// hangs under u3) and a regeneration (a2r, missing from u2's children: one
// mismatch), and the head a2, which is not the latest leaf.
var chatgptBranched = fixtureWant{
	ref: "chatgpt-conversations.json#0", format: "chatgpt", source: "fx-chatgpt-branched",
	rows: []string{
		"sys d0 - #1 - system 1700000000.5",
		"ctx d1 sys #1 - system 1700000000.5",
		"u1 d2 ctx #1 - user 1700000010.25",
		"a1 d3 u1 #1 - assistant 1700000015.125",
		"u2 d4 a1 #1 - user 1700000100",
		"u3 d4 a1 #2 user_edit user 1700000300",
		"a2 d5 u2 #1 - assistant 1700000105",
		"a2r d5 u2 #2 regenerate assistant 1700000200",
		"a3 d5 u3 #1 - assistant 1700000305.5",
	},
	head:      "a2",
	path:      []string{"sys 1/1", "ctx 1/1", "u1 1/1", "a1 1/1", "u2 1/2", "a2 1/2"},
	requested: "a2", dropped: []string{"client-created-root", "gap"}, mismatches: 1,
	created: "1700000000.5",
}

// TestImportFixtureChatGPTBranched: the branched ChatGPT fixture's tree,
// head, times, ids and verbatim nodes (chatgptBranched); the user profile's
// two parts; the edit's text, image and unreferenced PDF; the siblings as
// alternatives report them; the top-level fields in metadata.import; a
// second owner's own conversation.
func TestImportFixtureChatGPTBranched(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	conv := importFixture(t, db, web, "alice", chatgptBranched)
	requireParts(t, db, conv, "sys", "system", `[{"type": "text", "text": ""}]`)
	requireParts(t, db, conv, "ctx", "system", `[{"type": "text", "text": "I live in Lisbon."}, {"type": "text", "text": "Answer briefly."}]`)
	requireParts(t, db, conv, "u3", "user", `[{"type": "text", "text": "Is Sintra closer? Here is my map."},
		{"type": "attachment", "uri": "file-service://file-map1", "media_type": "image/png"},
		{"type": "attachment", "uri": "chatgpt-attachment:file-guide", "media_type": "application/pdf"}]`)
	requireEqual(t, "attachments as keyed parts", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND type = 'attachment'`, conv), int64(2))
	requireSlice(t, "alternatives of the edit", queryRowsAs[string](t, db, `
		SELECT o.node_key || ' ' || coalesce(a.branch_reason, '-') || ' ' || a.on_head_path || ' ' || lo.node_key
		  FROM convo.alternatives($1, $2) a
		  JOIN convo.import_origins o ON o.conversation_id = $1 AND o.message_id = a.message_id
		  JOIN convo.import_origins lo ON lo.conversation_id = $1 AND lo.message_id = a.latest_leaf_id
		 ORDER BY a.created_at`, conv, nodeID(t, db, conv, "u3")), []string{"u2 - true a2r", "u3 user_edit false a3"})
	doc := fixtureObject(t, chatgptBranched.ref)
	requireStoredJSON(t, db, "metadata.import.conversation: the export without its mapping", without(doc, "mapping"),
		`SELECT metadata -> 'import' -> 'conversation' FROM convo.conversations WHERE id = $1`, conv)
	requireStoredJSON(t, db, "metadata.import.title", "A day trip from Lisbon",
		`SELECT metadata -> 'import' -> 'title' FROM convo.conversations WHERE id = $1`, conv)

	// Another owner: a conversation of its own, with the same tree.
	other := mustImport(t, web, "bob", "chatgpt", encodeJSON(t, doc))
	requireEqual(t, "bob's id", other, importedID(t, db, "chatgpt", "bob", "fx-chatgpt-branched"))
	requireSlice(t, "bob's tree", fixtureRows(t, db, other), chatgptBranched.rows)
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestImportFixtureChatGPTToolsAndFallback: the tool call and its result
// pair as tool_use and tool_result (its image an attachment), even for a
// registered effectful tool, with no ledger row; a message with no time
// takes its parent's; an unknown content type is kept in a part that says
// so; with no current_node the latest leaf is the head. The conversation
// with no ids gets its source key from the hash of its text, and with no
// conversation time its earliest message's.
func TestImportFixtureChatGPTToolsAndFallback(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	registerTestTool(t, db, "python", true, `{"type": "object"}`)
	conv := importFixture(t, db, web, "alice", fixtureWant{
		ref: "chatgpt-conversations.json#1", format: "chatgpt", source: "fx-chatgpt-tools",
		rows: []string{
			"n1 d0 - #1 - user 1700001000",
			"n2 d1 n1 #1 - assistant 1700001002",
			"n3 d2 n2 #1 - tool 1700001004",
			"n4 d3 n3 #1 - assistant 1700001004",
			"n4b d3 n3 #2 regenerate assistant 1700001020",
			"n5 d4 n4 #1 - user 1700001010",
		},
		head: "n4b", path: []string{"n1 1/1", "n2 1/1", "n3 1/1", "n4b 2/2"},
		fallback: "latest_leaf", dropped: []string{"n0"}, created: "1700001000",
	})
	requireParts(t, db, conv, "n2", "assistant", `[{"type": "tool_use", "id": "n2", "name": "python", "input":
		{"content_type": "code", "language": "python", "text": "import matplotlib.pyplot as plt\nplt.plot([0, 1, 2], [0, 1, 4])"}}]`)
	requireParts(t, db, conv, "n3", "tool", `[{"type": "tool_result", "tool_use_id": "n2", "is_error": false,
		"content": {"content_type": "execution_output", "text": "<Figure size 640x480>"}},
		{"type": "attachment", "uri": "file-service://file-plot", "media_type": "application/octet-stream"}]`)
	requireParts(t, db, conv, "n5", "user",
		`[{"type": "text", "text": "[unmapped chatgpt content_type hologram] {\"beam\": [1, 2], \"content_type\": \"hologram\"}"}]`)
	requireSlice(t, "keyed parts", queryRowsAs[string](t, db, `SELECT type || ' ' || coalesce(tool_name, '-') FROM convo.message_parts
		WHERE conversation_id = $1 AND type <> 'text' ORDER BY 1`, conv),
		[]string{"attachment -", "tool_result -", "tool_use python"})

	anon := importFixture(t, db, web, "alice", fixtureWant{
		ref: "chatgpt-conversations.json#2", format: "chatgpt",
		rows: []string{"a d0 - #1 - user 1700002000", "b d1 a #1 - assistant 1700002001.75"},
		head: "b", path: []string{"a 1/1", "b 1/1"}, requested: "b", created: "1700002000",
	})
	requireStoredJSON(t, db, "a null title", nil, `SELECT metadata -> 'import' -> 'title' FROM convo.conversations WHERE id = $1`, anon)
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestImportFixtureOpenWebUI: a chat row of the export (an edited first
// message as a second root, user_edit; two answers of the same time in
// the order childrenIds gives, not their keys'; a time in milliseconds; a
// message with no time at its parent's; files as attachments; currentId,
// not the latest leaf, as the head; the row's time as the
// conversation's), a bare chat (its root at the chat's time in
// milliseconds, a null currentId: the latest leaf), and a chat whose id is
// "" (its source key from the hash), its content verbatim.
func TestImportFixtureOpenWebUI(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	row := importFixture(t, db, web, "carol", fixtureWant{
		ref: "openwebui-export.json#0", format: "openwebui", source: "fx-owui-row",
		rows: []string{
			"m-u1 d0 - #1 - user 1710000010",
			"m-u0 d0 - #2 user_edit user 1710000100",
			"m-a1b d1 m-u1 #1 - assistant 1710000020",
			"m-a1 d1 m-u1 #2 regenerate assistant 1710000020",
			"m-u2 d2 m-a1b #1 - user 1710000060",
			"m-a2 d3 m-u2 #1 - assistant 1710000060",
		},
		head: "m-a2", path: []string{"m-u1 1/2", "m-a1b 1/2", "m-u2 1/1", "m-a2 1/1"},
		requested: "m-a2", created: "1710000000",
	})
	requireParts(t, db, row, "m-u1", "user", `[{"type": "text", "text": "Can you read this menu?"},
		{"type": "attachment", "uri": "openwebui-file:f-1", "media_type": "application/pdf"},
		{"type": "attachment", "uri": "data:image/png;base64,iVBORw0KGgo=", "media_type": "image/png"}]`)
	requireParts(t, db, row, "m-a2", "assistant", encodeJSON(t, []any{map[string]any{"type": "text",
		"text": "<details type=\"reasoning\" done=\"true\" duration=\"1\">\n<summary>Thought for 1 second</summary>\n&gt; The menu marks it.\n</details>\nThe pumpkin soup."}}))
	doc := fixtureObject(t, "openwebui-export.json#0")
	chat := doc["chat"].(map[string]any)
	requireStoredJSON(t, db, "metadata.import: title, row and chat", map[string]any{"title": "Menu question",
		"row": without(doc, "chat"), "chat": without(chat, "history", "messages")}, `
		SELECT jsonb_build_object('title', i -> 'title', 'row', i -> 'row', 'chat', i -> 'chat')
		  FROM (SELECT metadata -> 'import' AS i FROM convo.conversations WHERE id = $1) x`, row)

	importFixture(t, db, web, "carol", fixtureWant{
		ref: "openwebui-export.json#1", format: "openwebui", source: "fx-owui-bare",
		rows: []string{"b-1 d0 - #1 - system 1710001000", "b-2 d1 b-1 #1 - user 1710001001",
			"b-3 d2 b-2 #1 - assistant 1710001002.5"},
		head: "b-3", path: []string{"b-1 1/1", "b-2 1/1", "b-3 1/1"}, fallback: "latest_leaf", created: "1710001000",
	})

	quotes := importFixture(t, db, web, "carol", fixtureWant{
		ref: "openwebui-chat.json", format: "openwebui",
		rows: []string{"q-1 d0 - #1 - user 1710002001", "q-2 d1 q-1 #1 - assistant 1710002002"},
		head: "q-2", path: []string{"q-1 1/1", "q-2 1/1"}, requested: "q-2", created: "1710002000",
	})
	requireParts(t, db, quotes, "q-1", "user", `[{"type": "text", "text": "Why can''t I call the weather tool?"}]`)
	if got := queryRow[string](t, db, `SELECT parts -> 0 ->> 'text' FROM convo.messages WHERE conversation_id = $1
		AND id = (SELECT message_id FROM convo.import_origins WHERE conversation_id = $1 AND node_key = 'q-2')`, quotes); !strings.HasPrefix(got, `<details type="tool_calls" done="true" id="call_1"`) ||
		!strings.HasSuffix(got, "</details>\nIt is sunny in Lisbon.") {
		t.Errorf("the tool_calls block, kept in the text: %q", got)
	}
	requireCount(t, db, 0, `SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND type <> 'text'`, quotes)
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestImportFixtureLibreChat: the flat export (an edited first message, a
// second root under the zero UUID; a regeneration; a time with an offset;
// a message with no createdAt at its parent's time) and the recursive one
// (replies nested in children; an edit and a regeneration; a content
// array); roles from isCreatedByUser, the sender only in the origin; the
// latest leaf as the head; the earliest createdAt as the conversation's
// time; the top-level fields in metadata.import.
func TestImportFixtureLibreChat(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	flat := importFixture(t, db, web, "erin", fixtureWant{
		ref: "librechat-flat.json", format: "librechat", source: "fx-lc-flat",
		rows: []string{
			"lc-u1 d0 - #1 - user 1717232400",
			"lc-u1e d0 - #2 user_edit user 1717232700",
			"lc-a1 d1 lc-u1 #1 - assistant 1717232405.5",
			"lc-a1r d1 lc-u1 #2 regenerate assistant 1717232460",
			"lc-a2 d1 lc-u1e #1 - assistant 1717232704.25",
			"lc-u3 d2 lc-a2 #1 - user 1717232704.25",
		},
		head: "lc-u3", path: []string{"lc-u1e 2/2", "lc-a2 1/1", "lc-u3 1/1"}, fallback: "latest_leaf", created: "1717232400",
	})
	requireParts(t, db, flat, "lc-a2", "assistant", `[{"type": "text", "text": "Minestrone."}]`)
	requireSlice(t, "role and sender", queryRowsAs[string](t, db, `
		SELECT DISTINCT m.role || ' ' || (o.node ->> 'sender') FROM convo.messages m
		  JOIN convo.import_origins o ON o.conversation_id = m.conversation_id AND o.message_id = m.id
		 WHERE m.conversation_id = $1 ORDER BY 1`, flat), []string{"assistant GPT-4o", "user User"})
	doc := fixtureObject(t, "librechat-flat.json")
	requireStoredJSON(t, db, "metadata.import.conversation: the export without its messages", without(doc, "messages"),
		`SELECT metadata -> 'import' -> 'conversation' FROM convo.conversations WHERE id = $1`, flat)

	tree := importFixture(t, db, web, "erin", fixtureWant{
		ref: "librechat-recursive.json", format: "librechat", source: "fx-lc-tree",
		rows: []string{
			"t-u1 d0 - #1 - user 1714581311.53",
			"t-a1 d1 t-u1 #1 - assistant 1714581315",
			"t-a1r d1 t-u1 #2 regenerate assistant 1714581340",
			"t-u2 d2 t-a1 #1 - user 1714581360",
			"t-u2e d2 t-a1 #2 user_edit user 1714581420",
			"t-a2 d3 t-u2 #1 - assistant 1714581362",
		},
		head: "t-u2e", path: []string{"t-u1 1/1", "t-a1 1/2", "t-u2e 2/2"}, fallback: "latest_leaf", created: "1714581311.53",
	})
	requireParts(t, db, tree, "t-u2e", "user", `[{"type": "text", "text": "Sorted by time?"}, {"type": "text", "text": "(newest first)"}]`)
	requireParts(t, db, tree, "t-a1", "assistant", `[{"type": "text", "text": "Use ls."}]`)
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// refusalCase is one case of a *-refusals.json fixture.
type refusalCase struct {
	name, code, detail, after string
	source                    any
}

// readRefusals reads a *-refusals.json fixture.
func readRefusals(t testing.TB, file string) []refusalCase {
	t.Helper()
	var out []refusalCase
	for _, e := range fixtureDoc(t, file).([]any) {
		m := e.(map[string]any)
		c := refusalCase{source: m["source"]}
		c.name, _ = m["case"].(string)
		c.code, _ = m["sqlstate"].(string)
		c.detail, _ = m["detail"].(string)
		c.after, _ = m["after"].(string)
		if c.name == "" || c.code == "" || c.source == nil {
			t.Fatalf("%s: a case without a name, an SQLSTATE or a source: %v", file, m)
		}
		out = append(out, c)
	}
	return out
}

// writtenRows counts what an import writes: conversations, messages,
// head-log rows, import records and origins.
func writtenRows(t testing.TB, db *pgxpool.Pool) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT format('conversations %s, messages %s, head log %s, imports %s, origins %s',
		(SELECT count(*) FROM convo.conversations), (SELECT count(*) FROM convo.messages),
		(SELECT count(*) FROM convo.conversation_head_log), (SELECT count(*) FROM convo.imports),
		(SELECT count(*) FROM convo.import_origins))`)
}

// requireRefused runs import fn (the import's SQL, $1 the owner and $2 the
// source) in a transaction that sets session as convo.owner_id, and fails
// unless it is refused with code, its DETAIL holds detail, and nothing is
// written: no conversation, message, head-log, import or origin row, and
// no table changed at all.
func requireRefused(t testing.TB, db, web *pgxpool.Pool, session, query string, owner any, source, code, detail string) {
	t.Helper()
	counts, before := writtenRows(t, db), fingerprint(t, db)
	err := inOwnerTx(web, session, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, query, owner, source)
		return err
	})
	requireSQLState(t, err, code)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !strings.Contains(pgErr.Detail, detail) {
		t.Errorf("DETAIL %q does not name %q", pgErr.Detail, detail)
	}
	requireEqual(t, "rows after the refusal", writtenRows(t, db), counts)
	requireFingerprint(t, db, "the refused import", before)
}

// TestImportFixtureRefusals: every case of the three refusal fixtures
// (CV011 for what is malformed, naming the node; a case may name a
// fixture imported first, "after"), the owner refusals
// (none, empty, too long, another than the session's, no session owner),
// and the size caps on fixtures grown here (CV010 naming the node): each
// refused with its SQLSTATE and nothing written.
func TestImportFixtureRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	call := func(format string) string { return `SELECT ` + importFn(format) + `($1, $2::jsonb)` }
	n := 0
	for _, format := range []string{"chatgpt", "openwebui", "librechat"} {
		for _, c := range readRefusals(t, format+"-refusals.json") {
			n++
			owner := fmt.Sprintf("refusal-%d", n)
			t.Run(format+"/"+c.name, func(t *testing.T) {
				if c.after != "" {
					mustImport(t, web, owner, format, encodeJSON(t, fixtureDoc(t, c.after)))
				}
				requireRefused(t, db, web, owner, call(format), owner, encodeJSON(t, c.source), c.code, c.detail)
			})
		}
	}

	valid := map[string]string{"chatgpt": "chatgpt-conversations.json#0", "openwebui": "openwebui-export.json#0",
		"librechat": "librechat-flat.json"}
	for _, format := range []string{"chatgpt", "openwebui", "librechat"} {
		doc := encodeJSON(t, fixtureDoc(t, valid[format]))
		long := strings.Repeat("o", 256)
		for _, c := range []struct {
			name, session string
			owner         any
			detail        string
		}{
			{"no owner (NULL)", "alice", nil, "owner NULL"},
			{"an empty owner", "alice", "", "owner ''"},
			{"an owner of 256 characters", long, long, "owner of 256 characters"},
			{"another owner than the session's", "alice", "bob", "owner bob, convo.owner_id alice"},
			{"no owner set in the session", "", "alice", "owner alice, convo.owner_id unset"},
		} {
			t.Run(format+"/"+c.name, func(t *testing.T) {
				requireRefused(t, db, web, c.session, call(format), c.owner, doc, "CV011", c.detail)
			})
		}
	}

	big := strings.Repeat("x", 1<<20+10)
	grown := func(ref string, grow func(doc map[string]any)) string {
		doc := cloneJSON(t, fixtureObject(t, ref))
		grow(doc)
		return encodeJSON(t, doc)
	}
	chatgptMsg := func(doc map[string]any, key string) map[string]any {
		return doc["mapping"].(map[string]any)[key].(map[string]any)["message"].(map[string]any)
	}
	for i, c := range []struct {
		name, format, doc, detail string
	}{
		{"a ChatGPT part over 1 MiB", "chatgpt", grown("chatgpt-conversations.json#0", func(doc map[string]any) {
			chatgptMsg(doc, "u1")["content"] = map[string]any{"content_type": "text", "parts": []any{big}}
		}), "node u1: a part over max_part_bytes"},
		{"a ChatGPT tool input over 256 KiB", "chatgpt", grown("chatgpt-conversations.json#1", func(doc map[string]any) {
			chatgptMsg(doc, "n2")["content"] = map[string]any{"content_type": "code", "text": strings.Repeat("x", 300<<10)}
		}), "node n2: a tool input over max_tool_input_bytes"},
		{"ChatGPT metadata over 256 KiB", "chatgpt", grown("chatgpt-conversations.json#2", func(doc map[string]any) {
			doc["notes"] = strings.Repeat("x", 300<<10)
		}), "metadata of"},
		{"an Open WebUI message over 1 MiB", "openwebui", grown("openwebui-export.json#0", func(doc map[string]any) {
			doc["chat"].(map[string]any)["history"].(map[string]any)["messages"].(map[string]any)["m-a1"].(map[string]any)["content"] = big
		}), "node m-a1: a part over max_part_bytes"},
		{"a LibreChat text over 1 MiB", "librechat", grown("librechat-flat.json", func(doc map[string]any) {
			doc["messages"].([]any)[1].(map[string]any)["text"] = big
		}), "node lc-a1: a part over max_part_bytes"},
		{"a LibreChat export nested 257 levels deep", "librechat", grown("librechat-recursive.json", func(doc map[string]any) {
			doc["messages"] = lcChain(257)
		}), "message lc-255, at nesting depth 255"},
	} {
		owner := fmt.Sprintf("cap-%d", i)
		t.Run(c.format+"/"+c.name, func(t *testing.T) {
			requireRefused(t, db, web, owner, call(c.format), owner, c.doc, "CV010", c.detail)
		})
	}
	requireEqual(t, "rows after every refusal", writtenRows(t, db),
		"conversations 0, messages 0, head log 0, imports 0, origins 0")
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestImportFixtureExportRoundTrip: the branched ChatGPT fixture, imported,
// then edited with an effectful call charged and settled on the new
// branch, exports with its origins and reads back row for row into a
// second database, its import record carried along.
func TestImportFixtureExportRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := mustImport(t, loginAs(t, src, "convo_app"), "owner-1", "chatgpt", encodeJSON(t, fixtureDoc(t, chatgptBranched.ref)))
	user := queryRow[string](t, src, `SELECT message_id::text FROM convo.path($1) WHERE role = 'user' ORDER BY depth DESC LIMIT 1`, conv)
	requireEqual(t, "the last user turn on the path", user, nodeID(t, src, conv, "u2"))
	editMsg(t, src, conv, user, textParts("Buy me 500 credits instead."))
	appendMsg(t, src, conv, "assistant", effToolUses(effBuy("call_f", "buy", 500)))
	effSettle(t, src, conv, effForCall(t, src, conv, "call_f").EffectID, "ch_f")
	want := conversationRows(t, src, conv)
	for _, table := range []string{"import_origins", "tool_effects", "tool_effect_events"} {
		if len(want[table]) == 0 {
			t.Fatalf("the imported and edited conversation has no rows in convo.%s", table)
		}
	}
	doc := exportAs(t, src, "", conv)
	if _, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", doc); err != nil {
		t.Fatalf("restoring the export: %v", err)
	}
	requireSameRows(t, conv, conversationRows(t, src, conv, assigned...), conversationRows(t, dst, conv, assigned...))
	requireEqual(t, "the export of the restored conversation", restoredDoc(t, exportAs(t, dst, "", conv)), restoredDoc(t, doc))
	requireEqual(t, "the carried import record", queryRow[string](t, dst, `SELECT format || ' ' || source_key || ' ' || (import_id IS NOT NULL)
		FROM convo.imports WHERE conversation_id = $1 AND format <> 'pgconvo'`, conv), "chatgpt fx-chatgpt-branched true")
	requireEqual(t, "failing checks after the restore", failingChecks(t, dst), "")
}
