package tests

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/chatimport"
	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// Tests of the whole-export import (migrate import-chatgpt and
// import-openwebui, docs/importing.md, "Importing a whole export"), run through the command against a
// fresh database, as a login member of convo_app.

var chatImports = chatImportsCorpus.path + "/"

// readJSON returns a sample file, decoded (the test is skipped without the
// samples beside the clone: requireCorpus).
func readJSON(t *testing.T, name string) any {
	t.Helper()
	requireCorpus(t, chatImportsCorpus)
	body, err := os.ReadFile(chatImports + name)
	if err != nil {
		t.Fatalf("reading a sample (the tests read ../shared/samples): %v", err)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// chatgptSamples returns the ChatGPT samples as four conversations with four
// source ids: the linear one, the same without its ids (its id comes from
// the hash of its text), and the two browser exports, whose shared id
// "fixture" becomes two.
func chatgptSamples(t *testing.T) []any {
	t.Helper()
	linear := readJSON(t, "chatgpt-openwebui-importer-linear.json").([]any)[0].(map[string]any)
	anonymous := readJSON(t, "chatgpt-openwebui-importer-linear.json").([]any)[0].(map[string]any)
	delete(anonymous, "conversation_id")
	delete(anonymous, "id")
	image := readJSON(t, "chatgpt-exporter-image-generation.json").(map[string]any)
	thinking := readJSON(t, "chatgpt-exporter-thinking-summaries.json").(map[string]any)
	thinking["id"] = "fixture-thinking"
	return []any{linear, anonymous, image, thinking}
}

// nodeCounts returns the messages and the message-less nodes of ChatGPT
// conversations, counted from their JSON.
func nodeCounts(convs ...any) (messages, dropped int) {
	for _, c := range convs {
		for _, n := range c.(map[string]any)["mapping"].(map[string]any) {
			if _, ok := n.(map[string]any)["message"].(map[string]any); ok {
				messages++
			} else {
				dropped++
			}
		}
	}
	return messages, dropped
}

// writeJSON writes v as JSON to a new file name in dir and returns its path.
func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// appURL returns the URL of a new login role of db's database that is a
// member of convo_app: the role the import runs as.
func appURL(t *testing.T, db *pgxpool.Pool) string {
	t.Helper()
	return loginAs(t, db, "convo_app").Config().ConnString()
}

// summaryLine is the first line of the summary.
func summaryLine(imported, present, refused int, owner string) string {
	noun := "conversations"
	if imported+present+refused == 1 {
		noun = "conversation"
	}
	return fmt.Sprintf("imported %d, already present %d, refused %d, of %d %s (owner %s,",
		imported, present, refused, imported+present+refused, noun, owner)
}

// TestImportCLIChatGPT: a conversations.json of the samples imports every
// conversation, its messages and its message-less nodes, as the summary
// says; a second run finds them all already present and writes nothing.
func TestImportCLIChatGPT(t *testing.T) {
	requireCorpus(t, chatImportsCorpus)
	t.Parallel()
	db := newDB(t)
	convs := chatgptSamples(t)
	file := writeJSON(t, t.TempDir(), "conversations.json", convs)
	messages, dropped := nodeCounts(convs...)
	args := []string{"import-chatgpt", "-owner", "alice", "-database", appURL(t, db), file}

	requireCLI(t, nil, 0, []string{summaryLine(4, 0, 0, "alice"),
		fmt.Sprintf("messages %d, message-less nodes kept verbatim %d\n", messages, dropped)}, args...)
	requireCount(t, db, 4, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'alice'`)
	requireCount(t, db, int64(messages), `SELECT count(*) FROM convo.messages m JOIN convo.conversations c ON c.id = m.conversation_id
	                                       WHERE c.owner_id = 'alice'`)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE id = $1`,
		importedID(t, db, "chatgpt", "alice", "fixture-thinking"))

	before := fingerprint(t, db)
	r := requireCLI(t, nil, 0, []string{summaryLine(0, 4, 0, "alice"), "messages 0, message-less nodes kept verbatim 0\n"}, args...)
	if strings.Contains(r.stdout, "refused conversations") {
		t.Fatalf("a repeat refused something:\n%s", r.stdout)
	}
	requireFingerprint(t, db, "a repeated import", before)
}

// TestImportCLIRefusalGoesOn: a malformed conversation in the middle is
// refused with its index, SQLSTATE and DETAIL (naming its ids), and nothing of it is
// written; the others are imported, and the exit code is 1.
func TestImportCLIRefusalGoesOn(t *testing.T) {
	requireCorpus(t, chatImportsCorpus)
	t.Parallel()
	db := newDB(t)
	convs := chatgptSamples(t)
	bad := readJSON(t, "chatgpt-exporter-thinking-summaries.json").(map[string]any)
	bad["id"] = "fixture-bad"
	bad["mapping"].(map[string]any)["n3"].(map[string]any)["message"].(map[string]any)["author"] = map[string]any{"role": "robot"}
	file := writeJSON(t, t.TempDir(), "conversations.json", []any{convs[0], bad, convs[2], "not a conversation"})
	messages, dropped := nodeCounts(convs[0], convs[2])
	badID := importedID(t, db, "chatgpt", "bob", "fixture-bad")

	r := requireCLI(t, nil, 1, []string{
		summaryLine(2, 0, 2, "bob"),
		fmt.Sprintf("messages %d, message-less nodes kept verbatim %d\n", messages, dropped),
		"refused conversations.json[1]: CV011 ChatGPT node n3 has a missing or unknown author.role\n" +
			"  DETAIL: ChatGPT conversation fixture-bad of owner bob, conversation " + badID + ", node n3\n",
		"refused conversations.json[3]: CV011 p_conversation must be one ChatGPT conversation",
		"2 of 4 conversations refused",
	}, "-database", appURL(t, db), "-owner", "bob", "import-chatgpt", file)
	if strings.Index(r.stdout, "conversations.json[1]") > strings.Index(r.stdout, "conversations.json[3]") {
		t.Fatalf("refusals out of order:\n%s", r.stdout)
	}
	requireCount(t, db, 0, `SELECT count(*) FROM convo.conversations WHERE id = $1`, badID)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.import_origins WHERE conversation_id = $1`, badID)
	requireCount(t, db, 2, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'bob'`)
}

// TestImportCLIShards: a directory and a zip of conversations-NNN.json
// shards (beside the export's other files) import every shard in order; a
// refusal names its shard.
func TestImportCLIShards(t *testing.T) {
	requireCorpus(t, chatImportsCorpus)
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	convs := chatgptSamples(t)
	messages, dropped := nodeCounts(convs...)
	shards := map[string]any{
		"conversations-000.json": convs[:1],
		"conversations-001.json": convs[1:3],
		"conversations-002.json": convs[3:],
		"export_manifest.json":   map[string]any{"files": 3},
		"chat.html":              "<html></html>",
	}
	dir := t.TempDir()
	for name, v := range shards {
		writeJSON(t, dir, name, v)
	}
	requireCLI(t, nil, 0, []string{summaryLine(4, 0, 0, "dir"),
		fmt.Sprintf("messages %d, message-less nodes kept verbatim %d\n", messages, dropped)},
		"import-chatgpt", "-owner", "dir", "-database", url, dir)

	shards["conversations-001.json"] = append(append([]any{}, convs[1:3]...), map[string]any{"id": "no-mapping"})
	zipPath := filepath.Join(t.TempDir(), "export.zip")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"conversations-002.json", "export_manifest.json", "conversations-000.json", "conversations-001.json"} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.NewEncoder(w).Encode(shards[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zipPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	requireCLI(t, nil, 1, []string{summaryLine(4, 0, 1, "zip"),
		"refused conversations-001.json[2]: CV011 a ChatGPT conversation needs a \"mapping\" object",
		"  DETAIL: ChatGPT conversation no-mapping of owner zip, conversation " + importedID(t, db, "chatgpt", "zip", "no-mapping") + "\n"},
		"import-chatgpt", "-owner", "zip", "-database", url, zipPath)
	requireCount(t, db, 4, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'zip'`)
}

// TestImportCLIOpenWebUI: an Open WebUI export (an array of chat rows and
// bare chats) and a single chat import; a repeat is already present.
func TestImportCLIOpenWebUI(t *testing.T) {
	requireCorpus(t, chatImportsCorpus)
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	chat := readJSON(t, "openwebui-openwebui-importer-chat.json").(map[string]any)
	n := len(chat["history"].(map[string]any)["messages"].(map[string]any))
	row := map[string]any{"id": "row-1", "user_id": "u1", "title": "a row", "chat": chat, "created_at": 1700000000,
		"updated_at": 1700000100, "meta": map[string]any{"tags": []any{}}}
	dir := t.TempDir()
	export := writeJSON(t, dir, "chat-export.json", []any{row, chat})
	args := []string{"import-openwebui", "-owner", "carol", "-database", url, export}
	requireCLI(t, nil, 0, []string{summaryLine(2, 0, 0, "carol"), fmt.Sprintf("messages %d, message-less nodes kept verbatim 0\n", 2*n)}, args...)
	requireCLI(t, nil, 0, []string{summaryLine(0, 2, 0, "carol"), "messages 0,"}, args...)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE id = $1`, importedID(t, db, "openwebui", "carol", "row-1"))

	single := writeJSON(t, dir, "one-chat.json", chat)
	requireCLI(t, nil, 0, []string{summaryLine(1, 0, 0, "dave"), fmt.Sprintf("messages %d,", n)},
		"import-openwebui", "-owner", "dave", "-database", url, single)
	requireCLI(t, nil, 0, []string{summaryLine(0, 1, 0, "dave")}, "import-openwebui", "-owner", "dave", "-database", url, single)
	requireCount(t, db, 3, `SELECT count(*) FROM convo.conversations`)
}

// TestImportCLILibreChat: LibreChat's recursive and flat exports, one
// conversation a file, import with their messages counted (a recursive
// export's nested replies too), and again as already present.
func TestImportCLILibreChat(t *testing.T) {
	requireCorpus(t, chatExportsCorpus)
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	for _, name := range []string{"librechat-librechat-tree.json", "librechat-librechat-flat-branches.json"} {
		path, err := filepath.Abs(filepath.Join(chatExportsCorpus.path, name))
		if err != nil {
			t.Fatal(err)
		}
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading a sample (the tests read ../shared/samples): %v", err)
		}
		doc := decodeSample(t, body).(map[string]any)
		n := len(newSrcTree(t, "librechat", doc).nodes)
		requireCLI(t, nil, 0, []string{summaryLine(1, 0, 0, "erin"), fmt.Sprintf("messages %d,", n)},
			"import-librechat", "-owner", "erin", "-database", url, path)
		requireCLI(t, nil, 0, []string{summaryLine(0, 1, 0, "erin")}, "import-librechat", "-owner", "erin", "-database", url, path)
	}
	requireCount(t, db, 2, `SELECT count(*) FROM convo.conversations`)
}

// TestImportCLIUsage: a wrong command line exits 2 and connects to nothing;
// an export it cannot read, or a role that cannot call the import, exits 1;
// none writes anything.
func TestImportCLIUsage(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	dir := t.TempDir()
	file := writeJSON(t, dir, "conversations.json", []any{fixtureDoc(t, "chatgpt-conversations.json#0")})
	before := fingerprint(t, db)
	for _, c := range []struct {
		code int
		want string
		args []string
	}{
		{2, "needs -owner OWNER", []string{"import-chatgpt", "-database", url, file}},
		{2, "takes one FILE, got 2", []string{"import-chatgpt", "-owner", "o", "-database", url, file, file}},
		{2, "takes one FILE, got 0", []string{"import-openwebui", "-owner", "o", "-database", url}},
		{2, `unknown verb "import-claude"`, []string{"import-claude", "-owner", "o", "-database", url, file}},
		{2, "flag provided but not defined: -ownr", []string{"import-chatgpt", "-ownr", "o", file}},
		{2, "-owner goes with an import verb, export or restore, not up", []string{"up", "-owner", "o", "-database", url}},
		{1, "no such file or directory", []string{"import-chatgpt", "-owner", "o", "-database", url, filepath.Join(dir, "missing.json")}},
		{1, "an Open WebUI export is one JSON file", []string{"import-openwebui", "-owner", "o", "-database", url, dir}},
		{1, "holds no conversations-NNN.json and no conversations.json", []string{"import-chatgpt", "-owner", "o", "-database", url, t.TempDir()}},
		{1, "cannot call convo.import_history(text, text, jsonb): connect as the application's login role",
			[]string{"import-chatgpt", "-owner", "o", "-database", loginAs(t, db).Config().ConnString(), file}},
	} {
		requireCLI(t, nil, c.code, []string{c.want}, c.args...)
	}
	requireFingerprint(t, db, "a refused command line", before)
}

// TestImportCLIRefusesAFileWhole: an empty export, or one given to the verb
// of another format, is one line naming the file (and, for another
// format, the verb that reads it), exit 1, and nothing is written; restore
// says the same of a file that is not a pgconvo export. The files are the
// test's own: one conversation of each format, in the shape its verb reads.
func TestImportCLIRefusesAFileWhole(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := appURL(t, db)
	_, dba := newRole(t, db, "LOGIN", "convo_admin")
	admin := dba.Config().ConnString()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty, blank := write("empty.json", ""), write("blank.json", " \n\t\n")
	chatgpt := write("conversations.json", `[{"id": "c1", "title": "t", "current_node": "n1", "mapping": {
		"n0": {"id": "n0", "message": null, "parent": null, "children": ["n1"]},
		"n1": {"id": "n1", "parent": "n0", "children": [], "message": {"id": "n1", "author": {"role": "user"},
		       "content": {"content_type": "text", "parts": ["hi"]}}}}}]`)
	openwebui := write("openwebui.json", `[{"id": "r1", "title": "t", "chat": {"title": "t", "history": {"currentId": "m1",
		"messages": {"m1": {"id": "m1", "parentId": null, "childrenIds": [], "role": "user", "content": "hi"}}}}}]`)
	librechat := write("librechat.json", `{"conversationId": "l1", "title": "t", "messages": [
		{"messageId": "m1", "parentMessageId": "00000000-0000-0000-0000-000000000000", "isCreatedByUser": true, "text": "hi"}]}`)
	pgconvo := write("restore-me.json", `{"format": "pgconvo.export", "version": 3, "conversation": {"id": "x", "owner_id": "o"}}`)
	numbers := write("numbers.json", `[1, 2, 3]`)
	before := fingerprint(t, db)
	for _, c := range []struct {
		want []string
		args []string
	}{
		{[]string{"import-chatgpt: " + empty + " is empty (0 bytes, or only whitespace)", "nothing was imported"},
			[]string{"import-chatgpt", "-owner", "o", "-database", app, empty}},
		{[]string{"import-librechat: " + blank + " is empty"}, []string{"import-librechat", "-owner", "o", "-database", app, blank}},
		{[]string{"import-openwebui: " + chatgpt + " is a ChatGPT export, not an Open WebUI export: `import-chatgpt` reads it; nothing was imported"},
			[]string{"import-openwebui", "-owner", "o", "-database", app, chatgpt}},
		{[]string{chatgpt + " is a ChatGPT export, not a LibreChat export: `import-chatgpt` reads it"},
			[]string{"import-librechat", "-owner", "o", "-database", app, chatgpt}},
		{[]string{openwebui + " is an Open WebUI export, not a ChatGPT export: `import-openwebui` reads it"},
			[]string{"import-chatgpt", "-owner", "o", "-database", app, openwebui}},
		{[]string{librechat + " is a LibreChat export, not an Open WebUI export: `import-librechat` reads it"},
			[]string{"import-openwebui", "-owner", "o", "-database", app, librechat}},
		{[]string{pgconvo + " is a pgconvo export, not a ChatGPT export: `restore` reads it"},
			[]string{"import-chatgpt", "-owner", "o", "-database", app, pgconvo}},
		{[]string{"restore: " + chatgpt + " is a ChatGPT export, not a pgconvo export: import it with `go run ./cmd/migrate -owner OWNER import-chatgpt " + chatgpt + "`"},
			[]string{"-database", admin, "restore", chatgpt}},
		{[]string{"restore: " + openwebui + " is an Open WebUI export, not a pgconvo export", "import-openwebui"},
			[]string{"-database", admin, "restore", openwebui}},
		{[]string{"restore: " + librechat + " is a LibreChat export, not a pgconvo export", "import-librechat"},
			[]string{"-database", admin, "restore", librechat}},
		{[]string{"restore: " + empty + " is empty (0 bytes, or only whitespace): give the file `go run ./cmd/migrate export ID` wrote"},
			[]string{"-database", admin, "restore", empty}},
		{[]string{"restore: " + numbers + " is a JSON array, not a pgconvo export (a JSON object)"},
			[]string{"-database", admin, "restore", numbers}},
	} {
		name := c.args[0] + " " + filepath.Base(c.args[len(c.args)-1])
		if c.args[0] == "-database" {
			name = c.args[2] + " " + filepath.Base(c.args[3])
		}
		t.Run(name, func(t *testing.T) {
			r := requireCLI(t, nil, 1, nil, c.args...)
			for _, w := range c.want {
				requireOneError(t, r, w)
			}
			if strings.Contains(r.stdout, "imported") || strings.Contains(r.stdout, "restored") {
				t.Fatalf("migrate %v printed a result:\n%s", c.args, r.stdout)
			}
		})
	}
	requireFingerprint(t, db, "the refused files", before)
	// Each file is one its own verb reads: the refusals are of the verb, not the file.
	for _, c := range [][]string{{"import-chatgpt", chatgpt}, {"import-openwebui", openwebui}, {"import-librechat", librechat}} {
		requireCLI(t, nil, 0, []string{summaryLine(1, 0, 0, "o")}, c[0], "-owner", "o", "-database", app, c[1])
	}
}

// TestImportStreams: the decoder holds one conversation, not the file: when
// the first conversation of a large export reaches the importer, a small
// part of the file has been read; every conversation arrives, whole, in
// order, from a top-level array and from an object's "conversations".
func TestImportStreams(t *testing.T) {
	t.Parallel()
	const n = 3000
	var export bytes.Buffer
	writeSyntheticExport(&export, n)
	wrapped := append(append([]byte(`{"format": "x", "conversations": `), export.Bytes()...), '}')
	for name, body := range map[string][]byte{"array": export.Bytes(), "wrapper": wrapped} {
		r := &countingReader{r: bytes.NewReader(body)}
		var atFirst int64
		seen := 0
		err := chatimport.Each(r, func(i int, raw json.RawMessage) error {
			if i == 0 {
				atFirst = r.n
			}
			var c struct{ ID string }
			if err := json.Unmarshal(raw, &c); err != nil || c.ID != syntheticID(i) || i != seen {
				t.Fatalf("%s: conversation %d is %.80s (%v)", name, i, raw, err)
			}
			seen++
			return nil
		})
		if err != nil || seen != n {
			t.Fatalf("%s: %d conversations of %d (%v)", name, seen, n, err)
		}
		if len(body) < 10<<20 || atFirst > 256<<10 {
			t.Fatalf("%s: %d of %d bytes read when the first conversation arrived", name, atFirst, len(body))
		}
		t.Logf("%s: %d of %d bytes read when the first conversation arrived", name, atFirst, len(body))
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// TestImportCLIThroughput imports a generated export through the command
// and logs conversations and messages per second, as the summary prints
// them: 200 conversations on the tests' server, or, for a measurement
// (`go run ./cmd/bench -import N`), PGCONVO_IMPORT_CONVERSATIONS of them on a
// server of its own with fsync on, as a deployment commits.
func TestImportCLIThroughput(t *testing.T) {
	t.Parallel()
	n := pgtest.EnvCount(t, "PGCONVO_IMPORT_CONVERSATIONS", 200)
	var db *pgxpool.Pool
	if os.Getenv("PGCONVO_IMPORT_CONVERSATIONS") == "" {
		db = newDB(t)
	} else {
		db = durableDB(t)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeSyntheticExport(f, n)
	info, _ := f.Stat()
	f.Close()
	r := requireCLI(t, nil, 0, []string{summaryLine(n, 0, 0, "bench"),
		fmt.Sprintf("messages %d, message-less nodes kept verbatim %d\n", n*syntheticMessages, n)},
		"import-chatgpt", "-owner", "bench", "-database", appURL(t, db), f.Name())
	// The rate is printed for a run of a second or more, the time always.
	rate := regexp.MustCompile(`(?m)^[0-9.]+ s(: [0-9]+ conversations/s, [0-9]+ messages/s)?$`).FindString(r.stdout)
	if rate == "" {
		t.Fatalf("no time in:\n%s", r.stdout)
	}
	t.Logf("%d conversations (%.1f MB, %d messages each): %s", n, float64(info.Size())/1e6, syntheticMessages, rate)
}

// durableDB starts a server of its own with fsync, synchronous_commit and
// full_page_writes on, migrates its postgres database, and returns a pool
// on it; the server stops when the test ends.
func durableDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	srv, err := localpg.StartEphemeral(ctx, localpg.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	m, err := migrator.Open(srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return newPool(t, srv.URL("postgres"), pgx.QueryExecModeCacheStatement)
}

// syntheticMessages is the messages of each generated conversation: a
// hidden system message, ten turns, and a regenerated answer.
const syntheticMessages = 22

func syntheticID(i int) string { return fmt.Sprintf("synthetic-%06d", i) }

// writeSyntheticExport writes a conversations.json of n generated
// conversations shaped like real ones: a message-less root, a hidden empty
// system node, ten user and assistant turns of a few hundred characters,
// the fifth answer regenerated (the head stays on the first), float times.
func writeSyntheticExport(w io.Writer, n int) {
	text := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 5)
	node := func(key, parent string, children []string, role string, at float64, body string) map[string]any {
		msg := map[string]any{"id": key, "author": map[string]any{"role": role, "name": nil, "metadata": map[string]any{}},
			"create_time": at, "content": map[string]any{"content_type": "text", "parts": []any{body}},
			"status": "finished_successfully", "end_turn": role == "assistant", "weight": 1.0, "recipient": "all",
			"metadata": map[string]any{"model_slug": "gpt-4o", "request_id": "req-" + key}}
		return map[string]any{"id": key, "message": msg, "parent": parent, "children": children}
	}
	io.WriteString(w, "[")
	for i := range n {
		t0 := 1.7e9 + float64(i)*3600.123456
		m := map[string]any{"client-created-root": map[string]any{"id": "client-created-root", "message": nil, "parent": nil,
			"children": []any{"sys"}}}
		m["sys"] = node("sys", "client-created-root", []string{"u1"}, "system", 0, "")
		m["sys"].(map[string]any)["message"].(map[string]any)["create_time"] = nil
		parent := "sys"
		for turn := 1; turn <= 10; turn++ {
			u, a := fmt.Sprintf("u%d", turn), fmt.Sprintf("a%d", turn)
			next := []string{fmt.Sprintf("u%d", turn+1)}
			if turn == 10 {
				next = nil
			}
			m[u] = node(u, parent, []string{a}, "user", t0+float64(turn)*60, fmt.Sprintf("Question %d: %s", turn, text))
			m[a] = node(a, u, next, "assistant", t0+float64(turn)*60+7.5, fmt.Sprintf("Answer %d: %s", turn, text))
			if turn == 5 {
				m[u].(map[string]any)["children"] = []string{a, "a5b"}
				m["a5b"] = node("a5b", u, nil, "assistant", t0+float64(turn)*60+30, "A regenerated answer: "+text)
			}
			parent = a
		}
		conv := map[string]any{"id": syntheticID(i), "conversation_id": syntheticID(i), "title": fmt.Sprintf("Conversation %d", i),
			"create_time": t0, "update_time": t0 + 900, "current_node": "a10", "mapping": m,
			"default_model_slug": "gpt-4o", "is_archived": false}
		body, _ := json.Marshal(conv)
		if i > 0 {
			io.WriteString(w, ",\n")
		}
		w.Write(body)
	}
	io.WriteString(w, "]\n")
}
