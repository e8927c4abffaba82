package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Tests of imported ids and the record of imports, on documents written
// here: no (owner, source) pair takes another's id, a repeat is found by
// owner, format and source key, and every import is recorded with who
// made it and marks every row it writes.

// tinyChatGPT is a ChatGPT conversation of one question and its answer,
// whose source id is source and whose answer says answer.
func tinyChatGPT(source, answer string) string {
	return fmt.Sprintf(`{"conversation_id": %q, "title": "Tiny", "create_time": 1750000000, "current_node": "b",
	  "mapping": {
	    "a": {"id": "a", "parent": null, "children": ["b"], "message": {"author": {"role": "user"},
	          "content": {"content_type": "text", "parts": ["Hello?"]}, "create_time": 1750000001}},
	    "b": {"id": "b", "parent": "a", "children": [], "message": {"author": {"role": "assistant"},
	          "content": {"content_type": "text", "parts": [%q]}, "create_time": 1750000002}}}}`, source, answer)
}

// TestImportIDsDoNotCollideAcrossOwners: owner acme's source "42:foo" and
// owner "acme:42"'s source "foo" (one id under the old 'format:owner:key'
// rule) import as two conversations, each with the id of its own triple;
// each import is recorded (owner, format, source key, who) and names the
// rows it wrote; the same source with other content is merged into the
// same conversation under a record of its own, its head-log row 'import'
// naming that record.
func TestImportIDsDoNotCollideAcrossOwners(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	login, web := newRole(t, db, "LOGIN", "convo_app")
	acme := mustImport(t, web, "acme", "chatgpt", tinyChatGPT("42:foo", "Hi."))
	other := mustImport(t, web, "acme:42", "chatgpt", tinyChatGPT("foo", "Hi."))
	requireEqual(t, "acme's id", acme, importedID(t, db, "chatgpt", "acme", "42:foo"))
	requireEqual(t, "acme:42's id", other, importedID(t, db, "chatgpt", "acme:42", "foo"))
	if acme == other {
		t.Fatal("two owners' sources share one conversation")
	}
	for conv, want := range map[string]string{acme: "acme chatgpt 42:foo " + login, other: "acme:42 chatgpt foo " + login} {
		requireEqual(t, "the record of "+conv, queryRow[string](t, db, `SELECT owner_id || ' ' || format || ' ' || source_key || ' ' || imported_by
			FROM convo.imports WHERE conversation_id = $1`, conv), want)
		requireCount(t, db, 0, `SELECT count(*) FROM convo.messages m WHERE m.conversation_id = $1
			AND m.import_id IS DISTINCT FROM (SELECT id FROM convo.imports WHERE conversation_id = $1)`, conv)
		requireEqual(t, "the head log's import row names the record", queryRow[bool](t, db, `SELECT bool_and(l.import_id = i.id AND l.reason = 'import')
			FROM convo.conversation_head_log l JOIN convo.imports i USING (conversation_id) WHERE l.conversation_id = $1`, conv), true)
	}
	requireEqual(t, "a repeat", mustImport(t, web, "acme", "chatgpt", tinyChatGPT("42:foo", "Hi.")), acme)

	requireEqual(t, "a later export", mustImport(t, web, "acme", "chatgpt", tinyChatGPT("42:foo", "Hi there, later.")), acme)
	requireEqual(t, "the records of acme's source", queryRow[int64](t, db, `SELECT count(*) FROM convo.imports WHERE conversation_id = $1`, acme), int64(2))
	requireCount(t, db, 0, `SELECT count(*) FROM convo.conversation_head_log l WHERE l.conversation_id = $1
		AND (l.reason <> 'import' OR NOT EXISTS (SELECT 1 FROM convo.imports i WHERE i.conversation_id = $1 AND i.id = l.import_id))`, acme)
}

// noIDChatGPT is tinyChatGPT without an id of its own: its source key is
// the keyed digest of its JSON.
func noIDChatGPT(answer string) string {
	return strings.Replace(tinyChatGPT("", answer), `"conversation_id": "", `, ``, 1)
}

// TestErasedImportAnswersNoGuess: a document without an id of its own is
// keyed by its digest under the database's secret, and so is every
// conversation id an import gives: the id erasure keeps cannot be computed
// from a guessed document and its source key (import_history shows the key).
// After erase_conversation, importing a guess of the erased document
// answers as any other document: a new conversation, under an id that is
// not the erased one's. Guesses are tried in transactions rolled back, as
// an application would probe, the right one among them; then the erased
// document imports anew for real, and its repeat returns the new one.
func TestErasedImportAnswersNoGuess(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	_, web := newRole(t, db, "LOGIN", "convo_app")
	admin := loginAs(t, db, "convo_admin")
	secret := noIDChatGPT("Your PIN is 4821.")
	erased := mustImport(t, web, "alice", "chatgpt", secret)
	requireEqual(t, "a repeat before the erasure", mustImport(t, web, "alice", "chatgpt", secret), erased)
	mustExec(t, admin, `SELECT count(*) FROM convo.erase_conversation($1, 'the user asked')`, erased)

	// computable: the md5 rule (format, owner, source key[, n]) an
	// application could compute from what import_history shows.
	computable := func(source string, n int) string {
		return queryRow[string](t, db, `SELECT md5((CASE WHEN $2 = 0 THEN jsonb_build_array('chatgpt', 'alice', $1::text)
			ELSE jsonb_build_array('chatgpt', 'alice', $1::text, $2) END)::text)::uuid::text`, source, n)
	}
	before := fingerprint(t, db)
	type answer struct {
		sqlState         string
		created          bool
		erasedID         bool // the guess got the erased conversation's id
		idComputable     bool // its id follows from its source key
		erasedComputable bool // the erased id follows from the guess's source key
	}
	answers := map[answer][]string{}
	for i := 0; i < 60; i++ {
		pin := fmt.Sprintf("%04d", 4790+i) // 4821 among them
		doc := noIDChatGPT("Your PIN is " + pin + ".")
		var id, source string
		var created bool
		err := inOwnerTx(web, "alice", func(ctx context.Context, tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT conversation_id::text, source_key, created
				FROM convo.import_history('chatgpt', 'alice', $1::jsonb)`, doc).Scan(&id, &source, &created); err != nil {
				return err
			}
			return errRollBack
		})
		if err != errRollBack && sqlState(err) == "" {
			t.Fatalf("guess %s: %v", pin, err)
		}
		a := answer{sqlState: sqlState(err), created: created, erasedID: id == erased}
		if source != "" {
			a.idComputable = id == computable(source, 0) || id == computable(source, 1)
			a.erasedComputable = erased == computable(source, 0) || erased == computable(source, 1)
		}
		answers[a] = append(answers[a], pin)
	}
	if len(answers) != 1 {
		t.Fatalf("the guesses got different answers: %v", answers)
	}
	for a := range answers {
		if a.sqlState != "" || !a.created || a.erasedID || a.idComputable || a.erasedComputable {
			t.Fatalf("every guess should import as a new conversation under an id nobody computes: %+v", a)
		}
	}
	requireFingerprint(t, db, "the guesses rolled back", before)

	again := mustImport(t, web, "alice", "chatgpt", secret)
	if again == erased {
		t.Fatal("the erased document imported under the erased conversation's id")
	}
	requireEqual(t, "a repeat after the erasure", mustImport(t, web, "alice", "chatgpt", secret), again)
	requireCount(t, db, 2, `SELECT count(*) FROM convo.imports WHERE owner_id = 'alice' AND import_id IS NULL`)
}

// TestImportFindsAnEarlierRulesKey: a document without an id imported
// under the earlier rule (its source key 'sha:' and the md5 of its text)
// is still found as a repeat, not imported a second time. The earlier key
// is written in place by a superuser (the table's guard set aside for
// it), as the earlier rule wrote it.
func TestImportFindsAnEarlierRulesKey(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	_, web := newRole(t, db, "LOGIN", "convo_app")
	doc := noIDChatGPT("Hi.")
	conv := mustImport(t, web, "alice", "chatgpt", doc)
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, stmt := range []string{
		`ALTER TABLE convo.imports DISABLE TRIGGER imports_30_no_update`,
		`UPDATE convo.imports SET source_key = 'sha:' || md5($2::jsonb::text) WHERE conversation_id = $1 AND import_id IS NULL`,
		`ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_30_no_update`,
	} {
		args := []any{}
		if strings.Contains(stmt, "$1") {
			args = []any{conv, doc}
		}
		if _, err := tx.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, db)
	requireEqual(t, "the repeat of an import under the earlier rule", mustImport(t, web, "alice", "chatgpt", doc), conv)
	requireFingerprint(t, db, "the repeat", before)
}
