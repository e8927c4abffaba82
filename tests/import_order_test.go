package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// orderTurn is one message of a small chat the order tests write: its key,
// text and time (seconds); roles alternate from user.
type orderTurn struct {
	key, text string
	at        int64
}

// orderDoc writes turns as one linear chat of format with the source id
// src, its head at the last turn.
func orderDoc(t testing.TB, format, src string, turns []orderTurn) string {
	t.Helper()
	role := func(i int) string { return map[bool]string{true: "user", false: "assistant"}[i%2 == 0] }
	last := turns[len(turns)-1].key
	switch format {
	case "chatgpt":
		mapping := map[string]any{"root": map[string]any{"id": "root", "parent": nil, "message": nil, "children": []any{turns[0].key}}}
		for i, x := range turns {
			parent, children := "root", []any{}
			if i > 0 {
				parent = turns[i-1].key
			}
			if i+1 < len(turns) {
				children = []any{turns[i+1].key}
			}
			mapping[x.key] = map[string]any{"id": x.key, "parent": parent, "children": children, "message": map[string]any{
				"author": map[string]any{"role": role(i)}, "create_time": x.at,
				"content": map[string]any{"content_type": "text", "parts": []any{x.text}}}}
		}
		return encodeJSON(t, map[string]any{"id": src, "title": "Order", "create_time": 50, "current_node": last, "mapping": mapping})
	case "openwebui":
		messages := map[string]any{}
		for i, x := range turns {
			var parent any
			children := []any{}
			if i > 0 {
				parent = turns[i-1].key
			}
			if i+1 < len(turns) {
				children = []any{turns[i+1].key}
			}
			messages[x.key] = map[string]any{"id": x.key, "parentId": parent, "childrenIds": children, "role": role(i),
				"content": x.text, "timestamp": x.at}
		}
		return encodeJSON(t, map[string]any{"id": src, "title": "Order", "history": map[string]any{"currentId": last, "messages": messages}})
	default:
		messages := []any{}
		for i, x := range turns {
			parent := "00000000-0000-0000-0000-000000000000"
			if i > 0 {
				parent = turns[i-1].key
			}
			messages = append(messages, map[string]any{"messageId": x.key, "parentMessageId": parent, "isCreatedByUser": i%2 == 0,
				"sender": role(i), "text": x.text, "createdAt": time.Unix(x.at, 0).UTC().Format(time.RFC3339)})
		}
		return encodeJSON(t, map[string]any{"conversationId": src, "title": "Order", "messages": messages})
	}
}

// orderState is what an order of imports must not change: the
// conversations (id, owner, head), their messages (id, parent, role, parts,
// time, depth) and which source node each message came from.
func orderState(t testing.TB, db *pgxpool.Pool) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT concat_ws(E'\n--\n',
		(SELECT string_agg(concat_ws(' ', id, owner_id, head_message_id), E'\n' ORDER BY id) FROM convo.conversations),
		(SELECT string_agg(concat_ws(' ', id, parent_id, role, parts, extract(epoch FROM created_at), depth), E'\n' ORDER BY id)
		   FROM convo.messages),
		(SELECT string_agg(concat_ws(' ', message_id, source, node_key), E'\n' ORDER BY message_id) FROM convo.import_origins))`)
}

// TestImportOrderDoesNotMatter: two different chats under one source id,
// and a fragment of a chat (its first turns, the head inside) with the
// whole chat, imported in either order for one owner, in each format: both
// orders accept every import and end with the same conversations, heads,
// messages and origins (the same prefix is one set of messages, what
// differs are siblings; the head is the latest any import named), and a
// repeat of either import writes nothing. Before the merge, the second
// import of a pair was CV009, whichever it was.
func TestImportOrderDoesNotMatter(t *testing.T) {
	t.Parallel()
	a := []orderTurn{{"k0", "Hello", 100}, {"k1", "Hi, A here", 101}, {"k2", "Question A", 102}, {"k3", "Answer A", 103}, {"k4", "More A", 104}}
	b := []orderTurn{{"k0", "Hello", 100}, {"k1", "Hi, B here", 101}, {"k2", "Question B", 102}, {"k3", "Answer B", 103}, {"k4", "More B", 205}}
	cases := []struct {
		name     string
		first    []orderTurn
		second   []orderTurn
		messages int64
		head     string // the node key and text of the head at the end
	}{
		{"two chats sharing a source id", a, b, 9, "k4 More B"},
		{"a fragment and the whole", a[:3], a, 5, "k4 More A"},
	}
	for _, format := range []string{"chatgpt", "openwebui", "librechat"} {
		for _, c := range cases {
			t.Run(format+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				first, second := orderDoc(t, format, "shared-src", c.first), orderDoc(t, format, "shared-src", c.second)
				states := []string{}
				for _, order := range [][2]string{{first, second}, {second, first}} {
					db := newDB(t)
					web := loginAs(t, db, "convo_app")
					ids := []string{mustImport(t, web, "alice", format, order[0])}
					before := fingerprint(t, db)
					ids = append(ids, mustImport(t, web, "alice", format, order[1]))
					requireEqual(t, "the second import's conversation", ids[1], ids[0])
					if c.messages == 5 && len(order[1]) < len(order[0]) {
						requireFingerprint(t, db, "the fragment after the whole", before)
					}
					requireEqual(t, "messages", queryRow[int64](t, db, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, ids[0]), c.messages)
					requireEqual(t, "the head", queryRow[string](t, db, `SELECT o.node_key || ' ' || (m.parts -> 0 ->> 'text')
						FROM convo.conversations c JOIN convo.messages m ON m.conversation_id = c.id AND m.id = c.head_message_id
						JOIN convo.import_origins o ON o.conversation_id = c.id AND o.message_id = m.id WHERE c.id = $1`, ids[0]), c.head)
					requireEqual(t, "self_check", failingChecks(t, db), "")
					// A repeat of either writes nothing.
					state := fingerprint(t, db)
					for _, doc := range order {
						requireEqual(t, "a repeat's conversation", mustImport(t, web, "alice", format, doc), ids[0])
					}
					requireFingerprint(t, db, "a repeat", state)
					states = append(states, orderState(t, db))
				}
				requireEqual(t, "the state after the other order", states[1], states[0])
			})
		}
	}
}

// TestImportMergeRefusals: into a conversation a merge would extend, a
// malformed import of the same source is CV011 and one over a cap CV010,
// each writing nothing; another owner's import of the same source is a
// conversation of its own.
func TestImportMergeRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	web := loginAs(t, db, "convo_app")
	turns := []orderTurn{{"k0", "Hello", 100}, {"k1", "Hi", 101}}
	conv := mustImport(t, web, "alice", "chatgpt", orderDoc(t, "chatgpt", "merge-src", turns))
	before := fingerprint(t, db)
	bad := orderDoc(t, "chatgpt", "merge-src", append(turns, orderTurn{"k2", "More", 102}))
	for _, c := range []struct{ name, doc, code string }{
		{"an unknown role", strings.Replace(bad, `"role":"user"`, `"role":"robot"`, 1), "CV011"},
		{"a missing parent", strings.Replace(bad, `"parent":"k1"`, `"parent":"nowhere"`, 1), "CV011"},
		{"a part over the cap", strings.Replace(bad, `"More"`, `"`+strings.Repeat("x", 1<<20+1)+`"`, 1), "CV010"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := importAs(web, "alice", "chatgpt", c.doc)
			requireSQLState(t, err, c.code)
			requireFingerprint(t, db, c.name, before)
		})
	}
	other := mustImport(t, web, "bob", "chatgpt", bad)
	if other == conv {
		t.Fatal("another owner's import of the same source merged into alice's conversation")
	}
	requireEqual(t, "alice's messages", queryRow[int64](t, db, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, conv), int64(2))
}
