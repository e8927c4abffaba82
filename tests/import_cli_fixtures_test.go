package tests

import (
	"archive/zip"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Tests of the whole-export import commands (migrate import-chatgpt,
// import-openwebui, import-librechat) on the project's own fixtures
// (testdata/imports), as a login member of convo_app: a zip as ChatGPT's
// "Export data" writes it, shards, the Open WebUI and LibreChat files, the
// summary's counts, repeats that write nothing, and refusals that name
// their conversation and leave the others imported.

// writeZip writes a zip of members (name to content, in the order given)
// to a new file in a temporary directory and returns its path.
func writeZip(t *testing.T, members ...[2]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "export.zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, m := range members {
		w, err := zw.Create(m[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(m[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// readFixture is a fixture file's text, as committed.
func readFixture(t *testing.T, name string) string {
	t.Helper()
	body, err := os.ReadFile(fixturePath(t, name))
	if err != nil {
		t.Fatalf("reading the fixture %s: %v", name, err)
	}
	return string(body)
}

// refusalSource is the source of the case named name of a refusal fixture.
func refusalSource(t *testing.T, file, name string) any {
	t.Helper()
	for _, c := range readRefusals(t, file) {
		if c.name == name {
			return c.source
		}
	}
	t.Fatalf("%s has no case %q", file, name)
	return nil
}

// TestImportCLIFixtureChatGPTZip: the ChatGPT fixture's conversations.json,
// zipped beside the export's other files as ChatGPT writes it, imports its
// three conversations (17 messages, 3 message-less nodes) with the ids and
// heads the SQL function gives; the same zip again, and the bare file, are
// already present and write nothing.
func TestImportCLIFixtureChatGPTZip(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	file := fixturePath(t, "chatgpt-conversations.json")
	zipped := writeZip(t, [2]string{"chat.html", "<html></html>"}, [2]string{"user.json", `{"id": "user-1"}`},
		[2]string{"conversations.json", readFixture(t, "chatgpt-conversations.json")})
	args := []string{"import-chatgpt", "-owner", "zoe", "-database", url, zipped}
	r := requireCLI(t, nil, 0, []string{summaryLine(3, 0, 0, "zoe"), "messages 17, message-less nodes kept verbatim 3\n"}, args...)
	requireEqual(t, "refusals in the output", regexpCount(`(?m)^refused `, r.stdout), 0)
	requireCount(t, db, 3, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'zoe'`)
	requireCount(t, db, 17, `SELECT count(*) FROM convo.messages m JOIN convo.conversations c ON c.id = m.conversation_id
	                          WHERE c.owner_id = 'zoe'`)
	branched := importedID(t, db, "chatgpt", "zoe", "fx-chatgpt-branched")
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE id = $1 AND head_message_id = $2`,
		branched, nodeID(t, db, branched, "a2"))
	tools := importedID(t, db, "chatgpt", "zoe", "fx-chatgpt-tools")
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE id = $1 AND head_message_id = $2`,
		tools, nodeID(t, db, tools, "n4b"))
	requireCount(t, db, 1, `SELECT count(*) FROM convo.imports WHERE owner_id = 'zoe' AND source_key LIKE 'sha:%'`)

	before := fingerprint(t, db)
	requireCLI(t, nil, 0, []string{summaryLine(0, 3, 0, "zoe"), "messages 0, message-less nodes kept verbatim 0\n"}, args...)
	requireCLI(t, nil, 0, []string{summaryLine(0, 3, 0, "zoe")}, "import-chatgpt", "-owner", "zoe", "-database", url, file)
	requireFingerprint(t, db, "the repeats", before)
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestImportCLIFixtureChatGPTRefusals: a conversations.json and a zip of
// shards holding refused conversations beside good ones: each refusal is
// reported with its file, index, SQLSTATE, message and DETAIL (naming
// the source, the conversation and the node), nothing of it is written,
// the others are imported, and the exit code is 1.
func TestImportCLIFixtureChatGPTRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	branched, tools := fixtureDoc(t, "chatgpt-conversations.json#0"), fixtureDoc(t, "chatgpt-conversations.json#1")
	robot := refusalSource(t, "chatgpt-refusals.json", "an unknown author role")
	file := writeJSON(t, t.TempDir(), "conversations.json", []any{branched, robot, tools, "not a conversation"})
	robotID := importedID(t, db, "chatgpt", "bob", "fx-r-role")
	requireCLI(t, nil, 1, []string{
		summaryLine(2, 0, 2, "bob"),
		"messages 15, message-less nodes kept verbatim 3\n",
		"refused conversations.json[1]: CV011 ChatGPT node b has a missing or unknown author.role\n" +
			"  DETAIL: ChatGPT conversation fx-r-role of owner bob, conversation " + robotID + ", node b\n",
		"refused conversations.json[3]: CV011 p_conversation must be one ChatGPT conversation, a JSON object, not string\n" +
			"  DETAIL: owner bob\n",
		"2 of 4 conversations refused",
	}, "import-chatgpt", "-owner", "bob", "-database", url, file)
	requireCount(t, db, 2, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'bob'`)
	requireCount(t, db, 0, `SELECT (SELECT count(*) FROM convo.conversations WHERE id = $1)
		+ (SELECT count(*) FROM convo.imports WHERE conversation_id = $1)
		+ (SELECT count(*) FROM convo.import_origins WHERE conversation_id = $1)
		+ (SELECT count(*) FROM convo.conversation_head_log WHERE conversation_id = $1)`, robotID)

	// Shards in a zip, in a folder as some exports nest them, read in their
	// numbers' order; the cycle in the second shard is refused by name.
	cycle := encodeJSON(t, refusalSource(t, "chatgpt-refusals.json", "a cycle"))
	zipped := writeZip(t,
		[2]string{"export/conversations-001.json", "[" + cycle + ", " + encodeJSON(t, tools) + "]"},
		[2]string{"export/export_manifest.json", `{"files": 2}`},
		[2]string{"export/conversations-000.json", "[" + encodeJSON(t, branched) + "]"})
	cycleID := importedID(t, db, "chatgpt", "zip", "fx-r-cycle")
	r := requireCLI(t, nil, 1, []string{
		summaryLine(2, 0, 1, "zip"),
		"messages 15, message-less nodes kept verbatim 3\n",
		"refused export/conversations-001.json[0]: CV011 node a is its own ancestor: following its parents never reaches a root\n" +
			"  DETAIL: ChatGPT conversation fx-r-cycle of owner zip, conversation " + cycleID + ", node a\n",
		"1 of 3 conversations refused",
	}, "import-chatgpt", "-owner", "zip", "-database", url, zipped)
	requireEqual(t, "refusals in the output", regexpCount(`(?m)^refused `, r.stdout), 1)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.conversations WHERE id = $1`, cycleID)
	requireCount(t, db, 2, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'zip'`)
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestImportCLIFixtureOpenWebUI: the Open WebUI export (a chat row and a
// bare chat) and the single chat import with their messages counted; again,
// already present; an export holding a malformed chat imports the others
// and reports it.
func TestImportCLIFixtureOpenWebUI(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	export := fixturePath(t, "openwebui-export.json")
	requireCLI(t, nil, 0, []string{summaryLine(2, 0, 0, "carol"), "messages 9, message-less nodes kept verbatim 0\n"},
		"import-openwebui", "-owner", "carol", "-database", url, export)
	requireCLI(t, nil, 0, []string{summaryLine(0, 2, 0, "carol"), "messages 0,"},
		"import-openwebui", "-owner", "carol", "-database", url, export)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE id = $1`, importedID(t, db, "openwebui", "carol", "fx-owui-row"))
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE id = $1`, importedID(t, db, "openwebui", "carol", "fx-owui-bare"))
	single := fixturePath(t, "openwebui-chat.json")
	requireCLI(t, nil, 0, []string{summaryLine(1, 0, 0, "carol"), "messages 2,"},
		"import-openwebui", "-owner", "carol", "-database", url, single)
	requireCLI(t, nil, 0, []string{summaryLine(0, 1, 0, "carol")}, "import-openwebui", "-owner", "carol", "-database", url, single)

	orphan := refusalSource(t, "openwebui-refusals.json", "a missing parent")
	bad := writeJSON(t, t.TempDir(), "chat-export.json", []any{orphan, fixtureDoc(t, "openwebui-export.json#1")})
	requireCLI(t, nil, 1, []string{summaryLine(1, 0, 1, "dave"), "messages 3,",
		"refused chat-export.json[0]: CV011 Open WebUI message m2 names a parentId that is no message (missing parent)\n" +
			"  DETAIL: Open WebUI chat fx-r-orphan of owner dave, conversation " + importedID(t, db, "openwebui", "dave", "fx-r-orphan") +
			", message m2\n"},
		"import-openwebui", "-owner", "dave", "-database", url, bad)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'dave'`)
	requireCount(t, db, 4, `SELECT count(*) FROM convo.conversations`)
}

// TestImportCLIFixtureLibreChat: LibreChat's flat and recursive exports
// import with their messages counted (the recursive one's nested replies
// too), and again as already present; a file of two conversations, one
// malformed, imports the other and reports it.
func TestImportCLIFixtureLibreChat(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	for _, name := range []string{"librechat-flat.json", "librechat-recursive.json"} {
		path := fixturePath(t, name)
		requireCLI(t, nil, 0, []string{summaryLine(1, 0, 0, "erin"), "messages 6,"},
			"import-librechat", "-owner", "erin", "-database", url, path)
		requireCLI(t, nil, 0, []string{summaryLine(0, 1, 0, "erin")}, "import-librechat", "-owner", "erin", "-database", url, path)
	}
	requireCount(t, db, 2, `SELECT count(*) FROM convo.conversations`)

	dup := refusalSource(t, "librechat-refusals.json", "a duplicate messageId")
	bad := writeJSON(t, t.TempDir(), "librechat.json", []any{fixtureDoc(t, "librechat-recursive.json"), dup})
	requireCLI(t, nil, 1, []string{summaryLine(1, 0, 1, "fay"), "messages 6,",
		"refused librechat.json[1]: CV011 LibreChat message u1 has the messageId of another message too (a duplicate)\n" +
			"  DETAIL: LibreChat conversation fx-r-dup of owner fay, conversation " + importedID(t, db, "librechat", "fay", "fx-r-dup") +
			", message u1\n"},
		"import-librechat", "-owner", "fay", "-database", url, bad)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'fay'`)
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// regexpCount is how many times the regular expression expr matches s.
func regexpCount(expr, s string) int {
	return len(regexp.MustCompile(expr).FindAllStringIndex(s, -1))
}
