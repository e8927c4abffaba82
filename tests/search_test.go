package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of search_conversations: full-text search of an owner's messages.

// searchHit is one row of convo.search_conversations.
type searchHit struct {
	Conversation, Message, Role, Snippet string
	OnLivePath                           bool
	Rank                                 float32
}

// search calls convo.search_conversations as the application does (owner
// set) and returns its rows; before is the cursor (nil: the first page).
func search(t testing.TB, app *pgxpool.Pool, owner, query string, limit int, before *searchHit) []searchHit {
	t.Helper()
	var out []searchHit
	err := inOwnerTx(app, owner, func(ctx context.Context, tx pgx.Tx) error {
		var rank, conv, msg any
		if before != nil {
			rank, conv, msg = before.Rank, before.Conversation, before.Message
		}
		rows, err := tx.Query(ctx, `SELECT conversation_id::text, message_id::text, role, snippet, on_live_path, rank
		                              FROM convo.search_conversations($1, $2, $3, $4, $5, $6)`, owner, query, limit, rank, conv, msg)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (searchHit, error) {
			var h searchHit
			err := r.Scan(&h.Conversation, &h.Message, &h.Role, &h.Snippet, &h.OnLivePath, &h.Rank)
			return h, err
		})
		return err
	})
	if err != nil {
		t.Fatalf("search_conversations(%s, %q): %v", owner, query, err)
	}
	return out
}

func hitMessages(hits []searchHit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Message)
	}
	return out
}

// TestSearchFindsTheOwnersMessages: a word finds the owner's messages that
// hold it and no other owner's, best first, each with its conversation, a
// snippet marking the match and whether it is on the live path (an edited
// question and its answer are not, the edit is); tool calls and results are not searched; every page of
// a keyset-paged search together is the whole answer, in order, no row
// twice.
func TestSearchFindsTheOwnersMessages(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-q", "You are a shop's assistant.")
	question := appendMsg(t, db, conv, "user", textParts("Where is my brass lamp?"))
	answer := appendMsg(t, db, conv, "assistant", textParts("The lamp ships on Friday; a lamp, a lamp, a lamp."))
	edited := editMsg(t, db, conv, question, textParts("Where is my paper lamp?"))
	other := createConversation(t, db, "owner-other", "")
	appendMsg(t, db, other, "user", textParts("lamp lamp lamp"))
	// A tool call of a tool named for a lamp is not searched.
	effRegisterPurchase(t, db, "buy_lamp", "tool_call", "30 seconds")
	tools := createConversation(t, db, "owner-q", "")
	appendMsg(t, db, tools, "user", textParts("buy one"))
	appendMsg(t, db, tools, "assistant", effToolUses(effCall{"c1", "buy_lamp", `{"amount_minor": 100, "currency": "EUR"}`}))

	hits := search(t, app, "owner-q", "lamp", 20, nil)
	requireSlice(t, "messages found", sorted(hitMessages(hits)...), sorted(question, answer, edited))
	requireEqual(t, "the best match", hits[0].Message, answer)
	for _, h := range hits {
		if h.Conversation != conv || !strings.Contains(h.Snippet, "**lamp**") {
			t.Errorf("hit %+v: want conversation %s and a snippet marking lamp", h, conv)
		}
		requireEqual(t, "on the live path: "+h.Message, h.OnLivePath, h.Message == edited)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Rank > hits[i-1].Rank {
			t.Fatalf("hits out of rank order: %+v", hits)
		}
	}
	if got := search(t, app, "owner-q", "brass", 20, nil); len(got) != 1 || got[0].Message != question || got[0].OnLivePath {
		t.Fatalf("brass finds %+v, want the edited-away question %s", got, question)
	}

	// Paged one at a time: the same rows, in the same order.
	var paged []string
	var before *searchHit
	for i := 0; i < 10; i++ {
		page := search(t, app, "owner-q", "lamp", 1, before)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].Message)
		before = &page[0]
	}
	requireSlice(t, "the pages together", paged, hitMessages(hits))
}

// TestSearchLeavesOutDeletedAndErased: a deleted conversation is not
// searched until it is brought back; an erased one never again, and its
// words are gone from the index, not merely filtered.
func TestSearchLeavesOutDeletedAndErased(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	conv := createConversation(t, db, "owner-z", "")
	msg := appendMsg(t, db, conv, "user", textParts("my zanzibar itinerary"))
	kept := createConversation(t, db, "owner-z", "")
	keptMsg := appendMsg(t, db, kept, "user", textParts("zanzibar in june"))

	requireSlice(t, "before the deletion", sorted(hitMessages(search(t, app, "owner-z", "zanzibar", 20, nil))...), sorted(msg, keptMsg))
	if err := asOwner(app, "owner-z", `SELECT convo.delete_conversation($1)`, conv); err != nil {
		t.Fatal(err)
	}
	requireSlice(t, "after the deletion", hitMessages(search(t, app, "owner-z", "zanzibar", 20, nil)), []string{keptMsg})
	mustExec(t, admin, `SELECT convo.restore_deleted_conversation($1)`, conv)
	requireSlice(t, "after the restore", sorted(hitMessages(search(t, app, "owner-z", "zanzibar", 20, nil))...), sorted(msg, keptMsg))

	mustExec(t, admin, `SELECT * FROM convo.erase_conversation($1, 'asked')`, conv)
	requireSlice(t, "after the erasure", hitMessages(search(t, app, "owner-z", "zanzibar", 20, nil)), []string{keptMsg})
	requireCount(t, db, 0, `SELECT count(*) FROM convo_private.message_search WHERE conversation_id = $1`, conv)
	requireCount(t, db, 0, `SELECT count(*) FROM convo_private.message_search
	                         WHERE document @@ to_tsquery('simple', 'itinerary')`)
	// erase_owner too: the owner's words are nowhere in the index.
	mustExec(t, admin, `SELECT * FROM convo.erase_owner('owner-z', 'left')`)
	if got := search(t, app, "owner-z", "zanzibar", 20, nil); len(got) != 0 {
		t.Fatalf("after erase_owner search finds %+v", got)
	}
	requireCount(t, db, 0, `SELECT count(*) FROM convo_private.message_search WHERE document @@ to_tsquery('simple', 'zanzibar')`)
}

// TestSearchRefusals: each bad argument is refused with its SQLSTATE and
// writes nothing; a query of stop words alone finds nothing.
func TestSearchRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-b", "")
	appendMsg(t, db, conv, "user", textParts("hello there"))
	before := fingerprint(t, db)
	for _, c := range []struct {
		name, sql string
		args      []any
		code      string
	}{
		{"another owner", `SELECT * FROM convo.search_conversations('owner-other', 'hello')`, nil, "CV011"},
		{"no owner", `SELECT * FROM convo.search_conversations(NULL, 'hello')`, nil, "CV011"},
		{"no query", `SELECT * FROM convo.search_conversations('owner-b', NULL)`, nil, "CV011"},
		{"a blank query", `SELECT * FROM convo.search_conversations('owner-b', '   ')`, nil, "CV011"},
		{"a query over 1000 characters", `SELECT * FROM convo.search_conversations('owner-b', repeat('a', 1001))`, nil, "CV010"},
		{"a limit of 0", `SELECT * FROM convo.search_conversations('owner-b', 'hello', 0)`, nil, "CV011"},
		{"a limit of 101", `SELECT * FROM convo.search_conversations('owner-b', 'hello', 101)`, nil, "CV011"},
		{"half a cursor", `SELECT * FROM convo.search_conversations('owner-b', 'hello', 20, 0.5)`, nil, "CV011"},
		{"only words to leave out", `SELECT * FROM convo.search_conversations('owner-b', '-hello')`, nil, "CV011"},
		{"set_search_config by the application", `SELECT convo.set_search_config('english')`, nil, "42501"},
	} {
		err := asOwner(app, "owner-b", c.sql, c.args...)
		if sqlState(err) != c.code {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	for _, config := range []string{"klingon", ""} {
		_, err := db.Exec(context.Background(), `SELECT convo.set_search_config($1)`, nullable(config))
		if sqlState(err) != "CV011" {
			t.Errorf("set_search_config(%q): got %v, want CV011", config, err)
		}
	}
	requireFingerprint(t, db, "the refused calls", before)
	mustExec(t, db, `SELECT convo.set_search_config('english')`)
	if got := search(t, app, "owner-b", "the", 20, nil); len(got) != 0 {
		t.Fatalf("a stop word finds %+v", got)
	}
}

// TestSearchConfiguration: under 'english' a word finds its other forms
// (the index is written again under the new configuration, old messages
// too), which under 'simple' it did not; the same configuration again
// writes nothing; no unknown configuration is stored, by any path.
func TestSearchConfiguration(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	conv := createConversation(t, db, "owner-c", "")
	msg := appendMsg(t, db, conv, "user", textParts("The lamps were shipping"))
	requireEqual(t, "search_config by default", queryRow[string](t, db, `SELECT convo.search_config()`), "simple")
	if got := search(t, app, "owner-c", "lamp", 20, nil); len(got) != 0 {
		t.Fatalf("under simple, lamp finds %+v", got)
	}
	mustExec(t, admin, `SELECT convo.set_search_config('english')`)
	requireEqual(t, "search_config", queryRow[string](t, db, `SELECT convo.search_config()`), "english")
	requireSlice(t, "under english, lamp ships", hitMessages(search(t, app, "owner-c", "lamp ships", 20, nil)), []string{msg})
	later := appendMsg(t, db, conv, "user", textParts("Two more lamps"))
	requireSlice(t, "a later message", sorted(hitMessages(search(t, app, "owner-c", "lamp", 20, nil))...), sorted(msg, later))
	before := fingerprint(t, db)
	mustExec(t, admin, `SELECT convo.set_search_config('english')`)
	requireFingerprint(t, db, "the same configuration again", before)
	// The table's owner (here the superuser) writing the setting by hand
	// cannot store a configuration that does not exist, which every write
	// of a message would then fail on.
	_, err := db.Exec(context.Background(), `UPDATE convo_private.settings SET search_config = 'klingon'`)
	requireSQLState(t, err, "42704")
	requireFingerprint(t, db, "the refused update", before)
}

// TestSearchIndexMatchesTheMessages: after a mixed history (appends, edits,
// an import, a restore, an erasure) the index holds one entry per message
// with text, each its message's document, and nothing else.
func TestSearchIndexMatchesTheMessages(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for i := 0; i < 3; i++ {
		conv := createConversation(t, db, fmt.Sprintf("owner-%d", i), "system prompt")
		q := appendMsg(t, db, conv, "user", textParts(fmt.Sprintf("question %d", i)))
		appendMsg(t, db, conv, "assistant", textParts("answer"))
		editMsg(t, db, conv, q, textParts("edited question"))
	}
	mustExec(t, db, `SELECT * FROM convo.erase_owner('owner-1', 'asked')`)
	requireEqual(t, "index entries that are not their message's document", queryRow[int64](t, db, `
		SELECT count(*) FROM (
		  (SELECT m.conversation_id, m.id, convo_private.search_document(m.parts, 'simple', c.owner_id)::text
		     FROM convo.messages m JOIN convo.conversations c ON c.id = m.conversation_id
		    WHERE convo_private.search_text(m.parts) <> '' AND c.erased_at IS NULL
		   EXCEPT SELECT s.conversation_id, s.message_id, s.document::text FROM convo_private.message_search s)
		  UNION ALL
		  (SELECT s.conversation_id, s.message_id, s.document::text FROM convo_private.message_search s
		   EXCEPT SELECT m.conversation_id, m.id, convo_private.search_document(m.parts, 'simple', c.owner_id)::text
		     FROM convo.messages m JOIN convo.conversations c ON c.id = m.conversation_id
		    WHERE convo_private.search_text(m.parts) <> '' AND c.erased_at IS NULL)) x`), int64(0))
	// Four messages with text a conversation (the system prompt, the
	// question, its answer, the edit), three conversations, one erased.
	requireCount(t, db, 8, `SELECT count(*) FROM convo_private.message_search`)
}
