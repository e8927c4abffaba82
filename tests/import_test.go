package tests

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// refusedSamples are the sample conversations the import refuses, by rule:
// LibreChat's trimmed citations fragment names a parent (and a
// current_node) that is not in its mapping.
var refusedSamples = map[string]string{"librechat-chatgpt-citations-fragment.json#0": "CV011"}

// otherFormatSamples are the sample files in none of the formats: none
// (every file imports; LibreChat's own export by import_librechat).
var otherFormatSamples = []string{}

// importFn is the function for a format.
func importFn(format string) string { return "convo.import_" + format }

// importAs imports doc as owner through pool (a convo_app login, the owner
// set with SET LOCAL) and returns the conversation id or the error.
func importAs(pool *pgxpool.Pool, owner, format, doc string) (string, error) {
	var id string
	err := inOwnerTx(pool, owner, func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT `+importFn(format)+`($1, $2::jsonb)::text`, owner, doc).Scan(&id)
	})
	return id, err
}

// mustImport imports and fails the test on error.
func mustImport(t testing.TB, pool *pgxpool.Pool, owner, format, doc string) string {
	t.Helper()
	id, err := importAs(pool, owner, format, doc)
	if err != nil {
		t.Fatalf("importing as %s: %v", owner, err)
	}
	return id
}

// TestImportSamples: every conversation of every sample file imports (but
// the one the rules refuse), as convo_app for its owner; its messages,
// roots, leaves, branch points, head and the path from the root to the
// head (node keys, roles and times) are what the file says; the ids are
// the derived ones; one head-log row, reason import; no ledger row,
// generation or receipt; every part one of the four types; self_check clean.
func TestImportSamples(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	samples, other := readSamples(t)
	sort.Strings(other)
	requireSlice(t, "sample files in neither format", other, otherFormatSamples)
	if len(samples) < 10 {
		t.Fatalf("read %d sample conversations", len(samples))
	}
	for i, s := range samples {
		owner := fmt.Sprintf("owner-%d", i) // the two chatgpt-exporter files share the source id "fixture"
		doc := encodeJSON(t, s.doc)
		t.Run(s.name, func(t *testing.T) {
			if code, ok := refusedSamples[s.name]; ok {
				before := fingerprint(t, db)
				_, err := importAs(web, owner, s.format, doc)
				requireSQLState(t, err, code)
				requireFingerprint(t, db, "the refused sample", before)
				return
			}
			conv := mustImport(t, web, owner, s.format, doc)
			src := newSrcTree(t, s.format, s.doc)
			if src.source != "" {
				requireEqual(t, "conversation id", conv, importedID(t, db, s.format, owner, src.source))
			}
			want := expectTree(t, src)
			requireTree(t, storedTree(t, db, conv), want)
			requireEqual(t, "head id", queryRow[string](t, db, `SELECT head_message_id::text FROM convo.conversations WHERE id = $1`, conv),
				nodeID(t, db, conv, want.Head))
			requireSlice(t, "head log", queryRowsAs[string](t, db,
				`SELECT reason || ' ' || coalesce(moved_by, '-') FROM convo.head_history($1)`, conv), []string{"import -"})
			requireEqual(t, "ledger rows, generations and receipts", queryRow[int64](t, db, `
				SELECT (SELECT count(*) FROM convo.tool_effects) + (SELECT count(*) FROM convo.tool_effect_calls)
				     + (SELECT count(*) FROM convo.generations) + (SELECT count(*) FROM convo.tool_receipts)`), int64(0))
			requireEqual(t, "messages without their origin", queryRow[int64](t, db, `
				SELECT count(*) FROM convo.messages m WHERE m.conversation_id = $1
				   AND NOT EXISTS (SELECT 1 FROM convo.import_origins o WHERE o.conversation_id = m.conversation_id
				                     AND o.message_id = m.id)`, conv), int64(0))
			requireEqual(t, "parts with keys beyond the contract's", queryRow[int64](t, db, `
				SELECT count(*) FROM convo.message_parts p WHERE p.conversation_id = $1
				   AND EXISTS (SELECT 1 FROM jsonb_object_keys(p.body) k
				                WHERE k NOT IN ('type', 'text', 'id', 'name', 'input', 'tool_use_id', 'content', 'is_error', 'uri', 'media_type'))`,
				conv), int64(0))
			// A repeat returns the same id and writes nothing.
			before := fingerprint(t, db)
			requireEqual(t, "repeat", mustImport(t, web, owner, s.format, doc), conv)
			requireFingerprint(t, db, "the repeat", before)
		})
	}
	requireEqual(t, "self_check after the imports", failingChecks(t, db), "")
}

// chatgptBase is the linear real ChatGPT sample, one conversation.
func chatgptBase(t testing.TB) map[string]any {
	t.Helper()
	for _, s := range mustSamples(t) {
		if s.name == "chatgpt-openwebui-importer-linear.json#0" {
			return s.doc
		}
	}
	t.Fatal("no linear ChatGPT sample")
	return nil
}

// openwebuiBase is the real Open WebUI sample.
func openwebuiBase(t testing.TB) map[string]any {
	t.Helper()
	for _, s := range mustSamples(t) {
		if s.name == "openwebui-openwebui-importer-chat.json#0" {
			return s.doc
		}
	}
	t.Fatal("no Open WebUI sample")
	return nil
}

func mustSamples(t testing.TB) []importSample {
	t.Helper()
	s, _ := readSamples(t)
	return s
}

// nodeWhere returns the key of a node of the mapping for which pick holds,
// the first by key.
func nodeWhere(t testing.TB, mapping map[string]any, pick func(k string, n map[string]any) bool) string {
	t.Helper()
	var keys []string
	for k := range mapping {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n, ok := mapping[k].(map[string]any); ok && pick(k, n) {
			return k
		}
	}
	t.Fatal("no such node")
	return ""
}

// importCase is a mutation of a base document: the SQLSTATE it gets (or ""
// for an import that succeeds) and the node key the DETAIL must name.
type importCase struct {
	name   string
	mutate func(doc map[string]any) any
	code   string
	node   string
}

// runImportCases runs each case as convo_app for owner: a refusal has its
// SQLSTATE, names its node in DETAIL, and writes nothing; an accepted
// mutation imports to the tree its JSON says.
func runImportCases(t *testing.T, db, web *pgxpool.Pool, format string, base map[string]any, cases []importCase) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			owner := fmt.Sprintf("%s-case-%d", format, i)
			v := decodeSample(t, []byte(encodeJSON(t, c.mutate(cloneJSON(t, base)))))
			before := fingerprint(t, db)
			conv, err := importAs(web, owner, format, encodeJSON(t, v))
			if c.code == "" {
				if err != nil {
					t.Fatalf("the import failed: %v", err)
				}
				requireTree(t, storedTree(t, db, conv), expectTree(t, newSrcTree(t, format, v.(map[string]any))))
				requireEqual(t, "self_check", failingChecks(t, db), "")
				return
			}
			requireSQLState(t, err, c.code)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && !strings.Contains(pgErr.Detail, c.node) {
				t.Errorf("DETAIL %q does not name %q", pgErr.Detail, c.node)
			}
			requireFingerprint(t, db, "the refused import", before)
		})
	}
}

// TestImportChatGPTRefusals: the refusals (docs/importing.md, "Input and refusals") on
// mutations of a real export, each with its SQLSTATE, the node in DETAIL,
// and every table unchanged; and the tolerated mutations, which import to
// the tree their JSON says.
func TestImportChatGPTRefusals(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	base := chatgptBase(t)
	mapping := func(doc map[string]any) map[string]any { return doc["mapping"].(map[string]any) }
	node := func(doc map[string]any, k string) map[string]any { return mapping(doc)[k].(map[string]any) }
	msg := func(doc map[string]any, k string) map[string]any { return node(doc, k)["message"].(map[string]any) }
	root := nodeWhere(t, mapping(base), func(k string, n map[string]any) bool { return n["parent"] == nil })
	leaf := base["current_node"].(string)
	user := nodeWhere(t, mapping(base), func(k string, n map[string]any) bool {
		m, _ := n["message"].(map[string]any)
		a, _ := m["author"].(map[string]any)
		c, _ := m["content"].(map[string]any)
		return a["role"] == "user" && c["content_type"] == "text"
	})
	middle := node(base, leaf)["parent"].(string)
	assistant := nodeWhere(t, mapping(base), func(k string, n map[string]any) bool {
		m, _ := n["message"].(map[string]any)
		a, _ := m["author"].(map[string]any)
		return a["role"] == "assistant" && k != leaf
	})
	set := func(f func(doc map[string]any)) func(map[string]any) any {
		return func(doc map[string]any) any { f(doc); return doc }
	}
	runImportCases(t, db, web, "chatgpt", base, []importCase{
		{"the whole file's array", func(doc map[string]any) any { return []any{doc} }, "CV011", ""},
		{"no mapping", set(func(doc map[string]any) { delete(doc, "mapping") }), "CV011", ""},
		{"a mapping that is a list", set(func(doc map[string]any) { doc["mapping"] = []any{} }), "CV011", ""},
		{"a node that is not an object", set(func(doc map[string]any) { mapping(doc)[user] = "x" }), "CV011", user},
		{"a node id other than its key", set(func(doc map[string]any) { node(doc, user)["id"] = "other" }), "CV011", user},
		{"a parent that is a number", set(func(doc map[string]any) { node(doc, user)["parent"] = 7 }), "CV011", user},
		{"a missing parent", set(func(doc map[string]any) { node(doc, user)["parent"] = "no-such-node" }), "CV011", user},
		{"children not a list", set(func(doc map[string]any) { node(doc, user)["children"] = "x" }), "CV011", user},
		{"children not strings", set(func(doc map[string]any) { node(doc, user)["children"] = []any{1} }), "CV011", user},
		{"a cycle", set(func(doc map[string]any) { node(doc, root)["parent"] = leaf }), "CV011", ""},
		{"a node its own parent", set(func(doc map[string]any) { node(doc, user)["parent"] = user }), "CV011", user},
		{"a message that is a string", set(func(doc map[string]any) { node(doc, user)["message"] = "hi" }), "CV011", user},
		{"an unknown role", set(func(doc map[string]any) { msg(doc, user)["author"] = map[string]any{"role": "robot"} }), "CV011", user},
		{"no author", set(func(doc map[string]any) { delete(msg(doc, user), "author") }), "CV011", user},
		{"no content", set(func(doc map[string]any) { delete(msg(doc, user), "content") }), "CV011", user},
		{"a content_type that is not a string", set(func(doc map[string]any) {
			msg(doc, user)["content"] = map[string]any{"content_type": 3}
		}), "CV011", user},
		{"an ISO create_time", set(func(doc map[string]any) { msg(doc, user)["create_time"] = "2025-06-21T20:24:42Z" }), "CV011", user},
		{"a create_time past year 9999", set(func(doc map[string]any) { msg(doc, user)["create_time"] = 1e14 }), "CV011", user},
		{"an author.name that is a number", set(func(doc map[string]any) {
			msg(doc, user)["author"].(map[string]any)["name"] = 7
		}), "CV011", user},
		{"a current_node that names no node", set(func(doc map[string]any) { doc["current_node"] = "no-such-node" }), "CV011", "no-such-node"},
		{"a current_node that is a number", set(func(doc map[string]any) { doc["current_node"] = 5 }), "CV011", ""},
		{"a part over the cap", set(func(doc map[string]any) {
			msg(doc, user)["content"] = map[string]any{"content_type": "text", "parts": []any{strings.Repeat("x", 1<<20+10)}}
		}), "CV010", user},
		{"a tool input over the cap", set(func(doc map[string]any) {
			msg(doc, assistant)["recipient"] = "python"
			msg(doc, assistant)["content"] = map[string]any{"content_type": "code", "text": strings.Repeat("x", 300<<10)}
		}), "CV010", assistant},
		// Tolerated: the same tree, or the tree the JSON says.
		{"children lists that omit a child", set(func(doc map[string]any) { node(doc, middle)["children"] = []any{} }), "", ""},
		{"a message-less node midway", set(func(doc map[string]any) { node(doc, middle)["message"] = nil }), "", ""},
		{"no current_node", set(func(doc map[string]any) { delete(doc, "current_node") }), "", ""},
		{"a null current_node", set(func(doc map[string]any) { doc["current_node"] = nil }), "", ""},
		{"a current_node naming the root", set(func(doc map[string]any) { doc["current_node"] = root }), "", ""},
		{"an unknown content type", set(func(doc map[string]any) {
			msg(doc, user)["content"] = map[string]any{"content_type": "hologram", "beam": []any{1, 2}}
		}), "", ""},
		{"no metadata, no create_time", set(func(doc map[string]any) {
			delete(msg(doc, user), "metadata")
			delete(msg(doc, user), "create_time")
			delete(doc, "title")
		}), "", ""},
	})
}

// TestImportOpenWebUIRefusals: the refusals (docs/importing.md, "Open WebUI") on
// mutations of the real chat, and the tolerated ones (an edited first
// message is a second root; times in milliseconds; a chat row).
func TestImportOpenWebUIRefusals(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	base := openwebuiBase(t)
	messages := func(doc map[string]any) map[string]any {
		return doc["history"].(map[string]any)["messages"].(map[string]any)
	}
	msg := func(doc map[string]any, k string) map[string]any { return messages(doc)[k].(map[string]any) }
	root := nodeWhere(t, messages(base), func(k string, n map[string]any) bool { return n["parentId"] == nil })
	answer := nodeWhere(t, messages(base), func(k string, n map[string]any) bool { return n["parentId"] != nil })
	set := func(f func(doc map[string]any)) func(map[string]any) any {
		return func(doc map[string]any) any { f(doc); return doc }
	}
	runImportCases(t, db, web, "openwebui", base, []importCase{
		{"the export's array", func(doc map[string]any) any { return []any{map[string]any{"id": "c1", "chat": doc}} }, "CV011", ""},
		{"no history.messages", set(func(doc map[string]any) { delete(doc, "history") }), "CV011", ""},
		{"a message that is not an object", set(func(doc map[string]any) { messages(doc)[answer] = 5 }), "CV011", answer},
		{"an id other than its key", set(func(doc map[string]any) { msg(doc, answer)["id"] = "other" }), "CV011", answer},
		{"an unknown role", set(func(doc map[string]any) { msg(doc, answer)["role"] = "robot" }), "CV011", answer},
		{"a missing parent", set(func(doc map[string]any) { msg(doc, answer)["parentId"] = "no-such-message" }), "CV011", answer},
		{"a cycle", set(func(doc map[string]any) { msg(doc, root)["parentId"] = answer }), "CV011", ""},
		{"childrenIds not strings", set(func(doc map[string]any) { msg(doc, root)["childrenIds"] = []any{true} }), "CV011", root},
		{"an ISO timestamp", set(func(doc map[string]any) { msg(doc, answer)["timestamp"] = "2025-04-13" }), "CV011", answer},
		{"a currentId that names no message", set(func(doc map[string]any) {
			doc["history"].(map[string]any)["currentId"] = "no-such-message"
		}), "CV011", "no-such-message"},
		{"content over the part cap", set(func(doc map[string]any) { msg(doc, answer)["content"] = strings.Repeat("x", 1<<20+10) }), "CV010", answer},
		// Tolerated.
		{"childrenIds that omit a child", set(func(doc map[string]any) { msg(doc, root)["childrenIds"] = []any{} }), "", ""},
		{"times in milliseconds", set(func(doc map[string]any) {
			ts, _ := msg(doc, answer)["timestamp"].(interface{ Float64() (float64, error) })
			f, _ := ts.Float64()
			msg(doc, answer)["timestamp"] = int64(f) * 1000
		}), "", ""},
		{"an edited first message: a second root", set(func(doc map[string]any) {
			messages(doc)["edited-first"] = map[string]any{"id": "edited-first", "parentId": nil, "childrenIds": []any{},
				"role": "user", "content": "Hello again", "timestamp": 1744577600}
			doc["history"].(map[string]any)["currentId"] = "edited-first"
		}), "", ""},
		{"no currentId", set(func(doc map[string]any) { delete(doc["history"].(map[string]any), "currentId") }), "", ""},
		{"a chat row", func(doc map[string]any) any {
			return map[string]any{"id": "row-1", "title": "A row", "created_at": 1744577000, "chat": doc}
		}, "", ""},
		{"files and odd content", set(func(doc map[string]any) {
			msg(doc, root)["files"] = []any{map[string]any{"type": "image", "url": "data:image/png;base64,AAAA"},
				map[string]any{"type": "file", "id": "f1", "file": map[string]any{"meta": map[string]any{"content_type": "application/pdf"}}},
				"not a file"}
			msg(doc, answer)["content"] = []any{"a", "list"}
		}), "", ""},
	})
}

// TestImportParts: what the parts of imported messages hold: tool calls
// that pair become tool_use and tool_result, the rest text; an unknown
// content type is kept as a part that says so; a user profile is a system
// message; an edited first Open WebUI message is a user_edit root.
func TestImportParts(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	samples := mustSamples(t)
	byName := map[string]importSample{}
	for _, s := range samples {
		byName[s.name] = s
	}
	parts := func(conv, key string) string {
		return queryRow[string](t, db, `SELECT m.role || ' ' || coalesce(m.branch_reason, '-') || ' ' || m.parts::text
			FROM convo.messages m WHERE m.conversation_id = $1
			   AND m.id = (SELECT message_id FROM convo.import_origins WHERE conversation_id = $1 AND node_key = $2)`, conv, key)
	}
	img := mustImport(t, web, "p1", "chatgpt", encodeJSON(t, byName["chatgpt-exporter-image-generation.json#0"].doc))
	requireEqual(t, "a tool call", parts(img, "n15"),
		`assistant - [{"id": "n15", "name": "internal_tool", "type": "tool_use", "input": {"text": "code 2", "language": "json", "content_type": "code"}}]`)
	if got := parts(img, "n16"); !strings.HasPrefix(got, `tool - [{"type": "tool_result", "content": {`) ||
		!strings.Contains(got, `"is_error": false, "tool_use_id": "n15"}, {"uri": "sediment://`) {
		t.Errorf("a paired tool result and its image: %s", got)
	}
	requireEqual(t, "a hidden final leaf beside the next user turn", parts(img, "n7"),
		`user branch [{"text": "question 2", "type": "text"}]`)
	if got := parts(img, "n2"); !strings.HasPrefix(got, `tool - [{"uri": "sediment://`) {
		t.Errorf("an unpaired tool message keeps its role and is rendered: %s", got)
	}
	linear := mustImport(t, web, "p1", "chatgpt", encodeJSON(t, byName["chatgpt-openwebui-importer-linear.json#0"].doc))
	requireEqual(t, "user context as a system message", queryRow[int64](t, db, `
		SELECT count(*) FROM convo.messages m JOIN convo.import_origins o ON o.conversation_id = m.conversation_id AND o.message_id = m.id
		 WHERE m.conversation_id = $1 AND m.role = 'system'
		   AND o.node -> 'message' -> 'content' ->> 'content_type' = 'user_editable_context'
		   AND o.node -> 'message' -> 'author' ->> 'role' = 'user' AND jsonb_array_length(m.parts) = 2`, linear), int64(1))
	tree := mustImport(t, web, "p1", "chatgpt", encodeJSON(t, byName["librechat-chatgpt-tree.json#0"].doc))
	requireSlice(t, "branch reasons of the real tree", queryRowsAs[string](t, db, `
		SELECT role || ' ' || branch_reason FROM convo.messages WHERE conversation_id = $1 AND branch_reason IS NOT NULL ORDER BY 1`, tree),
		[]string{"assistant regenerate", "user user_edit"})

	odd := cloneJSON(t, byName["chatgpt-exporter-thinking-summaries.json#0"].doc)
	m := odd["mapping"].(map[string]any)["n1"].(map[string]any)["message"].(map[string]any)
	m["content"] = map[string]any{"content_type": "hologram", "beam": []any{1}}
	oddConv := mustImport(t, web, "p2", "chatgpt", encodeJSON(t, odd)) // p1 has the other "fixture"
	requireEqual(t, "an unknown content type", parts(oddConv, "n1"),
		`user - [{"text": "[unmapped chatgpt content_type hologram] {\"beam\": [1], \"content_type\": \"hologram\"}", "type": "text"}]`)
	requireEqual(t, "metadata.import", queryRow[string](t, db, `SELECT jsonb_build_object('format', i -> 'format', 'source_id', i -> 'source_id',
		'dropped', (SELECT array_agg(k) FROM jsonb_object_keys(i -> 'dropped_nodes') k), 'mismatches', i -> 'children_mismatches',
		'fallback', i -> 'head_fallback', 'requested', i -> 'requested_head', 'has_mapping', i -> 'conversation' ? 'mapping')::text
		FROM (SELECT metadata -> 'import' AS i FROM convo.conversations WHERE id = $1) x`, oddConv),
		`{"format": "chatgpt", "dropped": ["n0"], "fallback": null, "requested": "n14", "source_id": "fixture", "mismatches": 0, "has_mapping": false}`)

	noHead := cloneJSON(t, byName["librechat-chatgpt-tree.json#0"].doc)
	delete(noHead, "current_node")
	noHeadConv := mustImport(t, web, "p3", "chatgpt", encodeJSON(t, noHead))
	requireEqual(t, "the fallback head", queryRow[string](t, db, `SELECT metadata -> 'import' ->> 'head_fallback' FROM convo.conversations WHERE id = $1`, noHeadConv),
		"latest_leaf")
	requireEqual(t, "no fallback with a current_node", queryRow[bool](t, db, `SELECT metadata -> 'import' ->> 'head_fallback' IS NULL
		AND (metadata -> 'import' -> 'children_mismatches')::int = 0 FROM convo.conversations WHERE id = $1`, tree), true)

	ow := cloneJSON(t, byName["openwebui-openwebui-importer-chat.json#0"].doc)
	msgs := ow["history"].(map[string]any)["messages"].(map[string]any)
	msgs["edited-first"] = map[string]any{"parentId": nil, "role": "user", "content": "Hi again", "timestamp": 1744577999}
	owConv := mustImport(t, web, "p1", "openwebui", encodeJSON(t, ow))
	requireEqual(t, "an edited first message", parts(owConv, "edited-first"), `user user_edit [{"text": "Hi again", "type": "text"}]`)
	if got := queryRow[string](t, db, `SELECT parts ->> 0 FROM convo.messages WHERE conversation_id = $1 AND role = 'user' AND branch_reason IS NULL`, owConv); !strings.Contains(got, "can''t") {
		t.Errorf("Open WebUI content is kept verbatim, doubled quotes included: %s", got)
	}
}

// TestImportOwnersAndRepeats: the same conversation imports once per owner
// (two ids); the two exporter samples, which share the source id
// "fixture", merge into one conversation for one owner, whichever comes
// first (TestImportOrderDoesNotMatter); convo_app may not import for
// another owner (CV011) or with no owner set; a superuser may. Nothing is
// written by a refusal.
func TestImportOwnersAndRepeats(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	byName := map[string]string{}
	for _, s := range mustSamples(t) {
		byName[s.name] = encodeJSON(t, s.doc)
	}
	linear := byName["chatgpt-openwebui-importer-linear.json#0"]
	a := mustImport(t, web, "alice", "chatgpt", linear)
	b := mustImport(t, web, "bob", "chatgpt", linear)
	if a == b {
		t.Fatal("two owners got the same conversation")
	}
	requireEqual(t, "alice's messages equal bob's", queryRow[int64](t, db, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, a),
		queryRow[int64](t, db, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, b))

	image := mustImport(t, web, "alice", "chatgpt", byName["chatgpt-exporter-image-generation.json#0"])
	requireEqual(t, "the same source id with other content", mustImport(t, web, "alice", "chatgpt",
		byName["chatgpt-exporter-thinking-summaries.json#0"]), image)
	requireEqual(t, "the two samples' messages (none shared)", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, image), int64(14+24))
	before := fingerprint(t, db)

	ow := byName["openwebui-openwebui-importer-chat.json#0"]
	for _, c := range []struct {
		name, sessionOwner, owner string
	}{{"another owner", "alice", "bob"}, {"no owner set", "", "alice"}} {
		t.Run(c.name, func(t *testing.T) {
			err := inOwnerTx(web, c.sessionOwner, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT convo.import_openwebui($1, $2::jsonb)`, c.owner, ow)
				return err
			})
			requireSQLState(t, err, "CV011")
			err = inOwnerTx(web, c.sessionOwner, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT convo.import_chatgpt($1, $2::jsonb)`, c.owner, linear)
				return err
			})
			requireSQLState(t, err, "CV011")
			requireFingerprint(t, db, "the refused import", before)
		})
	}
	requireEqual(t, "a superuser imports for any owner", queryRow[string](t, db, `SELECT convo.import_openwebui('carol', $1::jsonb)::text`, ow),
		importedID(t, db, "openwebui", "carol", keyedSource(t, db, ow)))
}

// TestImportWritesNoEffects: an import whose tool calls name a registered
// effectful tool writes no ledger row (§4.9); the same call appended
// through the API afterwards does.
func TestImportWritesNoEffects(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	registerTestTool(t, db, "browser", true, `{"type": "object"}`)
	var doc string
	for _, s := range mustSamples(t) {
		if s.name == "librechat-chatgpt-export.json#0" {
			doc = encodeJSON(t, s.doc)
		}
	}
	conv := mustImport(t, web, "alice", "chatgpt", doc)
	requireEqual(t, "imported tool calls", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND type = 'tool_use' AND tool_name = 'browser'`, conv), int64(4))
	requireEqual(t, "imported tool results", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND type = 'tool_result'`, conv), int64(4))
	requireEqual(t, "ledger rows", queryRow[int64](t, db,
		`SELECT (SELECT count(*) FROM convo.tool_effects) + (SELECT count(*) FROM convo.tool_effect_calls)`), int64(0))
	// The ledger still works for what is appended after the import.
	mustExec(t, db, `SELECT convo.append_message($1, 'assistant', '[{"type": "tool_use", "id": "after-import", "name": "browser", "input": {}}]')`, conv)
	requireEqual(t, "ledger rows after an append", queryRow[int64](t, db, `SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1`, conv), int64(1))
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestImportErasure: erasing an imported conversation empties its parts,
// its metadata (metadata.import) and its verbatim origins: a marker
// planted in the source is nowhere afterwards, and import_origins is a place.
func TestImportErasure(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	marker := "MARK" + strings.ReplaceAll(newID(), "-", "")
	doc := cloneJSON(t, chatgptBase(t))
	doc["title"] = marker
	for _, n := range doc["mapping"].(map[string]any) {
		if m, ok := n.(map[string]any)["message"].(map[string]any); ok {
			m["metadata"] = map[string]any{"note": marker}
		}
	}
	conv := mustImport(t, web, "alice", "chatgpt", encodeJSON(t, doc))
	ow := cloneJSON(t, openwebuiBase(t))
	ow["title"] = marker
	owConv := mustImport(t, web, "alice", "openwebui", encodeJSON(t, ow))
	if got := markerPlaces(t, db, marker); len(got) < 2 {
		t.Fatalf("the marker was planted only in %v", got)
	}
	got := queryAsOwner(t, admin, "", `SELECT place || '=' || rows_redacted FROM convo.erase_conversation($1, 'asked')`, conv)
	n := queryRow[int64](t, db, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, conv)
	requireSlice(t, "places", got, []string{"messages=" + fmt.Sprint(n), "conversations=1", "conversation_changes=1",
		"import_origins=" + fmt.Sprint(n), "imports=1"})
	queryAsOwner(t, admin, "", `SELECT place FROM convo.erase_owner('alice', 'asked')`)
	requireSlice(t, "places still holding the marker", markerPlaces(t, db, marker), []string{})
	requireEqual(t, "origins left", queryRow[int64](t, db, `SELECT count(*) FROM convo.import_origins WHERE conversation_id IN ($1, $2)
		AND node::text <> '{"erased": true}'`, conv, owConv), int64(0))
	requireEqual(t, "self_check", failingChecks(t, db), "")
	// A repeat after erasure is not the same content any more.
	_, err := importAs(web, "alice", "chatgpt", encodeJSON(t, doc))
	requireSQLState(t, err, "CV009")
}

// TestImportOriginsAreGuarded: nobody but the import functions writes an
// origin record (it marks a message as imported), and none is changed but
// by erasure.
func TestImportOriginsAreGuarded(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	conv := mustImport(t, web, "alice", "chatgpt", encodeJSON(t, chatgptBase(t)))
	grantee := createGrantedRole(t, db)
	before := fingerprint(t, db)
	conn := dedicatedConn(t, db)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `SET ROLE "`+grantee+`"`); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(ctx, `INSERT INTO convo.import_origins SELECT conversation_id, gen_random_uuid(), source, node_key, node
		FROM convo.import_origins WHERE conversation_id = $1 LIMIT 1`, conv)
	requireSQLState(t, err, "CV005")
	_, err = db.Exec(ctx, `UPDATE convo.import_origins SET node = '{}' WHERE conversation_id = $1`, conv)
	requireSQLState(t, err, "CV005")
	_, err = db.Exec(ctx, `DELETE FROM convo.import_origins WHERE conversation_id = $1`, conv)
	requireSQLState(t, err, "CV005")
	requireFingerprint(t, db, "the refused writes", before)
}

// librechatBase is a LibreChat sample export by file name.
func librechatBase(t testing.TB, file string) map[string]any {
	t.Helper()
	for _, s := range mustSamples(t) {
		if s.name == file+"#0" {
			return s.doc
		}
	}
	t.Fatalf("no LibreChat sample %s", file)
	return nil
}

// lcFind returns the message of a LibreChat document whose messageId is
// id, wherever it is nested, with the list that holds it and its index.
func lcFind(t testing.TB, doc map[string]any, id string) (m map[string]any, list []any, i int) {
	t.Helper()
	var walk func(l []any) bool
	walk = func(l []any) bool {
		for j, e := range l {
			c, _ := e.(map[string]any)
			if c["messageId"] == id {
				m, list, i = c, l, j
				return true
			}
			if kids, ok := c["children"].([]any); ok && walk(kids) {
				return true
			}
		}
		return false
	}
	if l, _ := doc["messages"].([]any); !walk(l) {
		t.Fatalf("no message %s", id)
	}
	return m, list, i
}

// lcPick is the first messageId (bytewise) of the document for which pick
// holds, with its source parent ("" for a root).
func lcPick(t testing.TB, doc map[string]any, pick func(src srcTree, k string) bool) string {
	t.Helper()
	src := newSrcTree(t, "librechat", doc)
	var keys []string
	for k := range src.nodes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if pick(src, k) {
			return k
		}
	}
	t.Fatal("no such message")
	return ""
}

// TestImportLibreChatRefusals: import_librechat's refusals (CV011 naming
// the message, CV010 over a cap) on mutations of the real recursive and
// flat exports, each writing nothing; and the tolerated mutations, which
// import to the tree their JSON says (parentMessageId over nesting, a flat
// export's children unread, no times, offsets, recursive false).
// lcChain returns the messages of a recursive LibreChat export: n replies,
// each nested in the one before (ids lc-0 ... lc-<n-1>).
func lcChain(n int) []any {
	var next []any
	for i := n - 1; i >= 0; i-- {
		parent := zeroUUID
		if i > 0 {
			parent = fmt.Sprintf("lc-%d", i-1)
		}
		next = []any{map[string]any{"messageId": fmt.Sprintf("lc-%d", i), "parentMessageId": parent,
			"isCreatedByUser": i%2 == 0, "text": fmt.Sprintf("turn %d", i), "children": next}}
	}
	return next
}

func TestImportLibreChatRefusals(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	set := func(f func(doc map[string]any)) func(map[string]any) any {
		return func(doc map[string]any) any { f(doc); return doc }
	}
	tree := librechatBase(t, "librechat-librechat-tree.json")
	find := func(doc map[string]any, id string) map[string]any { m, _, _ := lcFind(t, doc, id); return m }
	root := lcPick(t, tree, func(s srcTree, k string) bool { return s.parent(k) == "" })
	// a nested user message with children, its parent, and its place there
	user := lcPick(t, tree, func(s srcTree, k string) bool {
		kids, _ := s.nodes[k]["children"].([]any)
		return s.role(k) == "user" && s.parent(k) != "" && len(kids) > 0
	})
	userParent := newSrcTree(t, "librechat", tree).parent(user)
	_, _, userAt := lcFind(t, tree, user)
	userPlace := fmt.Sprintf("children[%d] of message %s", userAt, userParent)
	leaf := expectTree(t, newSrcTree(t, "librechat", tree)).Head
	runImportCases(t, db, web, "librechat", tree, []importCase{
		{"the whole file in an array", func(doc map[string]any) any { return []any{doc} }, "CV011", ""},
		{"no messages", set(func(doc map[string]any) { delete(doc, "messages") }), "CV011", ""},
		{"messages that are an object", set(func(doc map[string]any) { doc["messages"] = map[string]any{} }), "CV011", ""},
		{"a message without messageId", set(func(doc map[string]any) { delete(find(doc, root), "messageId") }), "CV011", "messages[0]"},
		{"a nested message without messageId", set(func(doc map[string]any) { delete(find(doc, user), "messageId") }), "CV011", userPlace},
		{"a messageId that is a number", set(func(doc map[string]any) { find(doc, user)["messageId"] = 7 }), "CV011", userPlace},
		{"the zero UUID as a messageId", set(func(doc map[string]any) { find(doc, user)["messageId"] = zeroUUID }), "CV011", zeroUUID},
		{"a child that is not an object", set(func(doc map[string]any) {
			m := find(doc, user)
			m["children"] = append(m["children"].([]any), "x")
		}), "CV011", fmt.Sprintf("children[%d] of message %s", len(find(tree, user)["children"].([]any)), user)},
		{"a missing parent", set(func(doc map[string]any) { find(doc, user)["parentMessageId"] = "no-such-message" }), "CV011", user},
		{"a parentMessageId that is a number", set(func(doc map[string]any) { find(doc, user)["parentMessageId"] = 3 }), "CV011", user},
		{"a duplicate messageId", set(func(doc map[string]any) { find(doc, leaf)["messageId"] = user }), "CV011", user},
		{"a cycle", set(func(doc map[string]any) { find(doc, root)["parentMessageId"] = leaf }), "CV011", ""},
		{"a message its own parent", set(func(doc map[string]any) { find(doc, user)["parentMessageId"] = user }), "CV011", user},
		{"a createdAt that is not ISO 8601", set(func(doc map[string]any) { find(doc, root)["createdAt"] = "yesterday" }), "CV011", root},
		{"a createdAt in month 13", set(func(doc map[string]any) { find(doc, root)["createdAt"] = "2024-13-01T00:00:00Z" }), "CV011", root},
		{"a createdAt of 30 February", set(func(doc map[string]any) { find(doc, root)["createdAt"] = "2024-02-30T10:00:00Z" }), "CV011", root},
		{"a createdAt that is a number", set(func(doc map[string]any) { find(doc, root)["createdAt"] = 1714581311 }), "CV011", root},
		{"an isCreatedByUser that is a string", set(func(doc map[string]any) { find(doc, user)["isCreatedByUser"] = "yes" }), "CV011", user},
		{"children that are not a list", set(func(doc map[string]any) { find(doc, user)["children"] = "x" }), "CV011", user},
		{"a text over the part cap", set(func(doc map[string]any) { find(doc, user)["text"] = strings.Repeat("x", 1<<20+10) }), "CV010", user},
		// Nesting is capped at 256 levels (max_librechat_nesting), so that the
		// copy per level keeps the import linear: 256 nested replies import,
		// 257 are CV010 naming the message whose replies go too deep.
		{"256 nested replies", set(func(doc map[string]any) { doc["messages"] = lcChain(256) }), "", ""},
		{"257 nested replies", set(func(doc map[string]any) { doc["messages"] = lcChain(257) }), "CV010", "message lc-255, at nesting depth 255"},
		// Tolerated: the tree the JSON says.
		{"a parentMessageId other than the nesting", set(func(doc map[string]any) { find(doc, leaf)["parentMessageId"] = root }), "", ""},
		{"a null parentMessageId", set(func(doc map[string]any) { find(doc, root)["parentMessageId"] = nil }), "", ""},
		{"no createdAt at all", set(func(doc map[string]any) {
			for k := range newSrcTree(t, "librechat", doc).nodes {
				delete(find(doc, k), "createdAt")
			}
		}), "", ""},
		{"a createdAt with an offset, one without a zone", set(func(doc map[string]any) {
			at, _ := time.Parse(time.RFC3339Nano, find(doc, root)["createdAt"].(string))
			find(doc, root)["createdAt"] = at.In(time.FixedZone("", 2*3600)).Format("2006-01-02T15:04:05.000-07:00")
			find(doc, user)["createdAt"] = at.Add(90 * time.Second).UTC().Format("2006-01-02T15:04:05.000000")
		}), "", ""},
		{"recursive false: children are not read", set(func(doc map[string]any) { doc["recursive"] = false }), "", ""},
		{"no conversationId", set(func(doc map[string]any) { delete(doc, "conversationId") }), "", ""},
		{"content arrays", set(func(doc map[string]any) {
			find(doc, user)["content"] = []any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "tool_call"}}
		}), "", ""},
	})

	flat := librechatBase(t, "librechat-librechat-flat-branches.json")
	roots := []string{}
	for _, e := range flat["messages"].([]any) {
		if m := e.(map[string]any); m["parentMessageId"] == zeroUUID {
			roots = append(roots, m["messageId"].(string))
		}
	}
	answer := lcPick(t, flat, func(s srcTree, k string) bool { return s.parent(k) != "" })
	runImportCases(t, db, web, "librechat", flat, []importCase{
		{"a missing parent", set(func(doc map[string]any) { find(doc, answer)["parentMessageId"] = "" }), "CV011", answer},
		{"a duplicate messageId", set(func(doc map[string]any) { find(doc, roots[1])["messageId"] = roots[0] }), "CV011", roots[0]},
		{"a message that is not an object", set(func(doc map[string]any) { doc["messages"] = append(doc["messages"].([]any), 5) }), "CV011",
			fmt.Sprintf("messages[%d]", len(flat["messages"].([]any)))},
		// Tolerated: children are not read in a flat export.
		{"children that disagree with parentMessageId", set(func(doc map[string]any) {
			find(doc, roots[1])["children"] = []any{answer}
		}), "", ""},
		{"a nested message, not read", set(func(doc map[string]any) {
			find(doc, roots[0])["children"] = []any{map[string]any{"messageId": "nested", "parentMessageId": roots[0], "text": "x"}}
		}), "", ""},
	})
}

// TestImportLibreChat: what import_librechat keeps of the two real
// exports: roles from isCreatedByUser (the sender label only in the
// origin), text verbatim, branch reasons (the flat export's second root is
// an edit), each message's origin (a recursive one's without its
// children), metadata.import (the top-level fields, the latest-leaf head),
// the conversation's time; content arrays; the same source with other
// content is CV009; a second owner gets a conversation of its own.
func TestImportLibreChat(t *testing.T) {
	requireCorpus(t, sampleCorpora...)
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	for _, file := range []string{"librechat-librechat-tree.json", "librechat-librechat-flat-branches.json"} {
		t.Run(file, func(t *testing.T) {
			doc := librechatBase(t, file)
			conv := mustImport(t, web, "lc-1", "librechat", encodeJSON(t, doc))
			src := newSrcTree(t, "librechat", doc)
			requireSlice(t, "role and sender", queryRowsAs[string](t, db, `
				SELECT DISTINCT m.role || ' ' || (o.node ->> 'sender') FROM convo.messages m
				  JOIN convo.import_origins o ON o.conversation_id = m.conversation_id AND o.message_id = m.id
				 WHERE m.conversation_id = $1 ORDER BY 1`, conv),
				map[string][]string{"librechat-librechat-tree.json": {"assistant Software Engineer", "user User"},
					"librechat-librechat-flat-branches.json": {"assistant GPT-4", "user User"}}[file])
			requireEqual(t, "messages whose parts are not their text", queryRow[int64](t, db, `
				SELECT count(*) FROM convo.messages m
				  JOIN convo.import_origins o ON o.conversation_id = m.conversation_id AND o.message_id = m.id
				 WHERE m.conversation_id = $1 AND m.parts <> jsonb_build_array(jsonb_build_object('type', 'text', 'text', o.node ->> 'text'))`,
				conv), int64(0))
			requireSlice(t, "branch reasons", queryRowsAs[string](t, db, `SELECT role || ' ' || branch_reason FROM convo.messages
				WHERE conversation_id = $1 AND branch_reason IS NOT NULL ORDER BY 1`, conv), []string{"assistant regenerate", "user user_edit"})
			// Origins: each message as exported, a recursive one without its children.
			want := map[string]any{}
			for k, m := range src.nodes {
				o := map[string]any{}
				for f, v := range m {
					if f != "children" || doc["recursive"] != true {
						o[f] = v
					}
				}
				want[k] = o
			}
			requireEqual(t, "origins other than the message", queryRow[int64](t, db, `
				SELECT count(*) FROM convo.import_origins o WHERE o.conversation_id = $1
				   AND (o.source <> 'librechat' OR o.node IS DISTINCT FROM $2::jsonb -> o.node_key)`, conv, encodeJSON(t, want)),
				int64(0))
			requireEqual(t, "origins", queryRow[int64](t, db, `SELECT count(*) FROM convo.import_origins WHERE conversation_id = $1`, conv),
				int64(len(src.nodes)))
			requireEqual(t, "metadata.import", queryRow[string](t, db, `SELECT jsonb_build_object('format', i -> 'format',
				'source_id', i -> 'source_id', 'title', i -> 'title', 'fallback', i -> 'head_fallback', 'requested', i -> 'requested_head',
				'dropped', i -> 'dropped_nodes', 'mismatches', i -> 'children_mismatches', 'messages', i -> 'conversation' ? 'messages',
				'options', i -> 'conversation' -> 'options' = $2::jsonb, 'endpoint', i -> 'conversation' -> 'endpoint')::text
				FROM (SELECT metadata -> 'import' AS i FROM convo.conversations WHERE id = $1) x`, conv, encodeJSON(t, doc["options"])),
				queryRow[string](t, db, `SELECT $1::jsonb::text`, encodeJSON(t, map[string]any{"format": "librechat", "source_id": doc["conversationId"], "title": doc["title"],
					"fallback": "latest_leaf", "requested": nil, "dropped": map[string]any{}, "mismatches": 0, "messages": false,
					"options": true, "endpoint": doc["endpoint"]})))
			requireEqual(t, "the conversation's time, its earliest createdAt", queryRow[float64](t, db,
				`SELECT extract(epoch FROM created_at)::float8 FROM convo.conversations WHERE id = $1`, conv), *src.convTime)

			// A second owner: a conversation of its own, the same tree.
			other := mustImport(t, web, "lc-2", "librechat", encodeJSON(t, doc))
			if other == conv {
				t.Fatal("two owners got the same conversation")
			}
			requireEqual(t, "the second owner's id", other, importedID(t, db, "librechat", "lc-2", src.source))
			requireTree(t, storedTree(t, db, other), storedTree(t, db, conv))
			// The same source with other content that adds no message and
			// names no later head: the same conversation, nothing written.
			changed := cloneJSON(t, doc)
			changed["title"] = "Renamed"
			before := fingerprint(t, db)
			requireEqual(t, "the same source renamed", mustImport(t, web, "lc-1", "librechat", encodeJSON(t, changed)), conv)
			requireFingerprint(t, db, "the same source with other content and the same messages", before)
		})
	}

	parts := func(conv, key string) string {
		return queryRow[string](t, db, `SELECT m.role || ' ' || m.parts::text
			FROM convo.messages m WHERE m.conversation_id = $1
			   AND m.id = (SELECT message_id FROM convo.import_origins WHERE conversation_id = $1 AND node_key = $2)`, conv, key)
	}
	doc := cloneJSON(t, librechatBase(t, "librechat-librechat-flat-branches.json"))
	list := doc["messages"].([]any)
	list[1].(map[string]any)["content"] = []any{map[string]any{"type": "text", "text": "a"},
		map[string]any{"type": "text", "text": map[string]any{"value": "b", "annotations": []any{}}},
		map[string]any{"type": "think", "think": "hmm"}, "odd"}
	list[2].(map[string]any)["text"] = 5
	delete(list[3].(map[string]any), "text")
	list[4].(map[string]any)["content"] = map[string]any{"x": 1}
	conv := mustImport(t, web, "lc-3", "librechat", encodeJSON(t, doc))
	id := func(i int) string { return list[i].(map[string]any)["messageId"].(string) }
	requireEqual(t, "a content array", parts(conv, id(1)), `assistant [{"text": "a", "type": "text"}, {"text": "b", "type": "text"}, `+
		`{"text": "[unmapped librechat part think] {\"type\": \"think\", \"think\": \"hmm\"}", "type": "text"}, `+
		`{"text": "[unmapped librechat part string] \"odd\"", "type": "text"}]`)
	requireEqual(t, "a text that is not a string", parts(conv, id(2)), `assistant [{"text": "[unmapped librechat text] 5", "type": "text"}]`)
	requireEqual(t, "no text", parts(conv, id(3)), `user [{"text": "", "type": "text"}]`)
	if got := parts(conv, id(4)); !strings.HasSuffix(got, `{"text": "[unmapped librechat content] {\"x\": 1}", "type": "text"}]`) {
		t.Errorf("a content that is not an array: %s", got)
	}
	requireEqual(t, "self_check", failingChecks(t, db), "")
}
