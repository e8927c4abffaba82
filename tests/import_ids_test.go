package tests

import (
	"fmt"
	"strings"
	"testing"
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
// rows it wrote; the same source with other content is CV009 naming the
// source key and the way out, and writes nothing.
func TestImportIDsDoNotCollideAcrossOwners(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	login, web := newRole(t, db, "LOGIN", "convo_app")
	acme := mustImport(t, web, "acme", "chatgpt", tinyChatGPT("42:foo", "Hi."))
	other := mustImport(t, web, "acme:42", "chatgpt", tinyChatGPT("foo", "Hi."))
	requireEqual(t, "acme's id", acme, importedID("chatgpt", "acme", "42:foo"))
	requireEqual(t, "acme:42's id", other, importedID("chatgpt", "acme:42", "foo"))
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

	before := fingerprint(t, db)
	_, err := importAs(web, "acme", "chatgpt", tinyChatGPT("42:foo", "Hi there, later."))
	requireSQLState(t, err, "CV009")
	e := pgError(t, err)
	if !strings.Contains(e.Message, "source 42:foo") || !strings.Contains(e.Detail, acme) || !strings.Contains(e.Hint, "another owner") {
		t.Fatalf("CV009 does not name the source key, the conversation and the way out: %q / %q / %q", e.Message, e.Detail, e.Hint)
	}
	requireFingerprint(t, db, "the refused import", before)
}
