package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// readmeRoles are the login roles the documents' session creates (cluster
// wide, so the test refuses to run where they exist and drops them after):
// README.md's first block makes web, support and dba; docs/deployment.md
// makes PostgREST's three.
var readmeRoles = []string{"web", "support", "dba", "authenticator", "web_anon", "web_user"}

// generatedDocs are the two documents of docs/ that the session does not
// run: they are the catalog's own description of the API and the schema,
// written by `go run ./cmd/apidocs` and checked byte for byte against a
// freshly migrated catalog by tests/apidocs_test.go (TestAPIDocsUpToDate,
// TestSchemaDocsUpToDate); their ```sql blocks are definitions, not steps.
var generatedDocs = map[string]bool{"api.md": true, "schema.md": true}

// readmeBlock is one ```sql block of a document.
type readmeBlock struct {
	line int // the document's line of the block's first SQL line
	sql  []string
}

// notRunComment marks the ```sql block right after it as not run, with its
// reason. The documents the session runs may not use it (TestReadme fails
// on one); the parser still recognises it so that it cannot hide a block.
var notRunComment = regexp.MustCompile(`^<!-- not run: (\S.*\S) -->$`)

// readmeSQLBlocks returns the ```sql blocks of a Markdown document, in
// order, and the number marked <!-- not run: reason --> (the comment on the
// line before the fence, or before the blank lines before it). A fence may
// be indented (a block inside a list item).
func readmeSQLBlocks(text string) (run []readmeBlock, skipped int, err error) {
	lines := strings.Split(text, "\n")
	previous := "" // the last non-blank line before the current one
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, "```") && line != "```sql" && line != "```" {
			// Another language's fence: skip to its end.
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			}
			previous = ""
			continue
		}
		if line != "```sql" {
			if strings.HasPrefix(line, "<!-- not run") && !notRunComment.MatchString(line) {
				return nil, 0, fmt.Errorf("line %d: write <!-- not run: reason -->, with a reason", i+1)
			}
			if line != "" {
				previous = line
			}
			continue
		}
		b := readmeBlock{line: i + 2}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.sql = append(b.sql, lines[i])
		}
		if i == len(lines) {
			return nil, 0, fmt.Errorf("line %d: a ```sql block that never ends", b.line-1)
		}
		if notRunComment.MatchString(previous) {
			skipped++
		} else {
			run = append(run, b)
		}
		previous = ""
	}
	return run, skipped, nil
}

// TestReadmeSQLBlocksAreFound: the extraction sees a fence, an indented one
// too, skips another language's, counts a not-run mark and refuses one
// without a reason.
func TestReadmeSQLBlocksAreFound(t *testing.T) {
	t.Parallel()
	text := "intro\n```sql\nSELECT 1;\n```\n```sh\necho ```sql\n```\n<!-- not run: shows CV005 -->\n\n```sql\nDELETE FROM x;\n```\n```sql\nSELECT 2;\nSELECT 3;\n```\n- item\n\n  ```sql\n  SELECT 4;\n  ```\n"
	run, skipped, err := readmeSQLBlocks(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(run) != 3 || skipped != 1 || run[0].line != 3 || run[1].line != 14 || strings.Join(run[1].sql, " ") != "SELECT 2; SELECT 3;" ||
		strings.TrimSpace(strings.Join(run[2].sql, "")) != "SELECT 4;" {
		t.Fatalf("got %d run %+v, %d skipped", len(run), run, skipped)
	}
	if _, _, err := readmeSQLBlocks("<!-- not run -->\n```sql\nSELECT 1;\n```\n"); err == nil {
		t.Fatal("a not-run mark without a reason must be refused")
	}
}

// sessionDoc is one document whose blocks the session runs.
type sessionDoc struct {
	name   string // from the repository root: README.md, docs/guide.md
	blocks []readmeBlock
}

// sessionDocs returns README.md and then every docs/*.md in name order but
// the generated ones, each with its ```sql blocks; a block marked not run
// fails the test, since every block of them runs.
func sessionDocs(t *testing.T) []sessionDoc {
	t.Helper()
	names, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	files := []string{"../README.md"}
	for _, n := range names {
		if !generatedDocs[filepath.Base(n)] {
			files = append(files, n)
		}
	}
	var docs []sessionDoc
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../")
		blocks, skipped, err := readmeSQLBlocks(string(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if skipped > 0 {
			t.Fatalf("%s: %d ```sql blocks are marked <!-- not run -->: every block runs, so make each runnable "+
				"(switch roles inside it: \\connect - support, or SET ROLE and RESET ROLE) and drop the mark", name, skipped)
		}
		docs = append(docs, sessionDoc{name: name, blocks: blocks})
	}
	if len(docs[0].blocks) == 0 {
		t.Fatal("README.md has no ```sql block to run")
	}
	return docs
}

// sessionScript is blocks as one psql script, each block behind a comment
// naming where it comes from, and where is the document line of each
// script line ("README.md:12").
func sessionScript(docs []sessionDoc) (script string, where []string) {
	var b strings.Builder
	for _, d := range docs {
		for _, bl := range d.blocks {
			fmt.Fprintf(&b, "-- %s:%d\n", d.name, bl.line)
			where = append(where, fmt.Sprintf("%s:%d", d.name, bl.line-1))
			for j, l := range bl.sql {
				b.WriteString(l + "\n")
				where = append(where, fmt.Sprintf("%s:%d", d.name, bl.line+j))
			}
		}
	}
	return b.String(), where
}

// runPsql runs script in one psql session (ON_ERROR_STOP=1) on dbURL, with
// DATABASE_URL set to it as the README says, and returns what psql printed
// with its script lines named by the documents' (where). It fails the test
// on an error or a warning.
func runPsql(t *testing.T, dbURL, label, script string, where []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "session.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(psqlPath(t), "-X", "-v", "ON_ERROR_STOP=1", "-d", dbURL, "-f", path)
	cmd.Env = append(exampleEnv(), "DATABASE_URL="+dbURL)
	out, err := cmd.CombinedOutput()
	at := regexp.MustCompile(`psql:` + regexp.QuoteMeta(path) + `:(\d+):`)
	shown := at.ReplaceAllStringFunc(string(out), func(m string) string {
		n, _ := strconv.Atoi(at.FindStringSubmatch(m)[1])
		if n >= 1 && n <= len(where) {
			return where[n-1] + ":"
		}
		return m
	})
	if err != nil {
		t.Fatalf("%s stopped (%v); psql said:\n%s", label, err, shown)
	}
	if strings.Contains(shown, "ERROR") || strings.Contains(strings.ToLower(shown), "warning") {
		t.Fatalf("%s ran with errors or warnings:\n%s", label, shown)
	}
	return shown
}

// TestReadme follows the documents as a new user does: every ```sql block
// of README.md, then of each docs/*.md in name order (but the generated
// docs/api.md and docs/schema.md), in order, as one psql session
// (ON_ERROR_STOP=1) on a freshly migrated database, connected as the README
// says: DATABASE_URL, the superuser's URL, which README.md's first block
// leaves for its application role. The first block is run once more before
// the session, on its own and on the same server, as a reader who pastes it
// twice does: roles are cluster-wide, and it creates each only if missing.
// Then the whole session runs a second time on the same database, and must
// run as cleanly: every role, schema, function and table a document makes
// is made only if missing (or replaced).
func TestReadme(t *testing.T) {
	t.Parallel()
	docs := sessionDocs(t)
	db := newDB(t)
	if !queryRow[bool](t, db, `SELECT session_user = 'postgres' AND rolsuper FROM pg_roles WHERE rolname = session_user`) {
		t.Fatal("the documents' session returns to postgres, the local server's superuser; this server's superuser is another role")
	}
	for _, role := range readmeRoles {
		if queryRow[bool](t, db, `SELECT count(*) > 0 FROM pg_roles WHERE rolname = $1`, role) {
			t.Fatalf("role %s exists on this server already; the documents' session creates it", role)
		}
	}
	t.Cleanup(func() {
		// psql has exited, but its last backend may still be ending (and
		// dropping web's temporary table): wait for it, then drop what the
		// roles hold here (deployment.md's grants) and the roles.
		ctx := context.Background()
		for i := 0; i < 100 && queryRow[bool](t, db, `SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = ANY ($1)`, readmeRoles); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		for _, role := range readmeRoles {
			if !queryRow[bool](t, db, `SELECT count(*) > 0 FROM pg_roles WHERE rolname = $1`, role) {
				continue
			}
			for _, st := range []string{`DROP OWNED BY ` + pgx.Identifier{role}.Sanitize(), `DROP ROLE ` + pgx.Identifier{role}.Sanitize()} {
				if _, err := db.Exec(ctx, st); err != nil {
					t.Errorf("%s: %v", st, err)
				}
			}
		}
	})
	dbURL := db.Config().ConnString()

	first := sessionDoc{name: docs[0].name, blocks: docs[0].blocks[:1]}
	script, where := sessionScript([]sessionDoc{first})
	runPsql(t, dbURL, "README.md's first sql block, run on its own", script, where)

	script, where = sessionScript(docs)
	runPsql(t, dbURL, "the documents' sql blocks", script, where)
	n := 0
	for _, d := range docs {
		n += len(d.blocks)
	}
	t.Logf("ran %d sql blocks of %d documents in order, README.md's first twice; the whole session runs twice below", n, len(docs))

	// Where the session ends, as the documents tell it.
	requireEqual(t, "the roles of README.md's first block", queryRow[string](t, db,
		`SELECT string_agg(format('%s:%s', r.rolname, g.rolname), ' ' ORDER BY r.rolname)
		   FROM pg_roles r JOIN pg_auth_members a ON a.member = r.oid JOIN pg_roles g ON g.oid = a.roleid
		  WHERE r.rolname IN ('web', 'support', 'dba')`), "dba:convo_admin support:convo_reader web:convo_app")
	requireEqual(t, "purchase_credits registered once, though the first block ran twice",
		queryRow[int64](t, db, `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`), int64(1))
	// The purchase conversation (README.md's agent loop) is the one erased
	// (docs/erasure.md), by dba, twice (a repeat is recorded too), and its
	// ledger stands: the charge refunded, the re-run confirmed and pending.
	requireEqual(t, "erasures", queryRow[string](t, db,
		`SELECT string_agg(format('%s %s', c.owner_id, e.erased_by), ', ' ORDER BY e.erased_at)
		   FROM convo.erasures e JOIN convo.conversations c ON c.id = e.conversation_id`), "customer-7 dba, customer-7 dba")
	requireEqual(t, "the erased purchase's ledger", queryRow[string](t, db,
		`SELECT string_agg(format('%s %s %s', e.state, e.amount_minor, e.arguments), ', ' ORDER BY e.requested_at)
		   FROM convo.tool_effects e WHERE e.conversation_id IN (SELECT conversation_id FROM convo.erasures)`),
		"compensated 500 {}, pending 700 {}")
	requireEqual(t, "the receipt", queryRow[string](t, db,
		`SELECT format('%s %s', status, http_status) FROM convo.tool_receipts WHERE owner_id = 'user-9'`), "applied 201")
	// guide.md's everyday paths: streamed, regenerated, edited, switched
	// to the old branch and back, each head move logged.
	requireEqual(t, "the everyday paths' head log", queryRow[string](t, db,
		`SELECT string_agg(l.reason, ' ' ORDER BY l.seq) FROM convo.conversation_head_log l
		   JOIN convo.conversations c ON c.id = l.conversation_id WHERE c.owner_id = 'customer-11'`),
		"create append append regenerate user_edit switch switch")
	// guide.md's stop, delete and search: the stopped answer kept, marked
	// incomplete, and continued; the deleted chat brought back, both logged.
	requireEqual(t, "the stopped answer and its continuation", queryRow[string](t, db,
		`SELECT string_agg(m.role || CASE WHEN m.incomplete THEN ' (incomplete)' ELSE '' END, ', ' ORDER BY m.depth)
		   FROM convo.messages m JOIN convo.conversations c ON c.id = m.conversation_id
		  WHERE c.owner_id = 'customer-12' AND m.conversation_id = (SELECT g.conversation_id FROM convo.generations g
		                                                            WHERE g.state = 'cancelled' AND g.message_id IS NOT NULL)`),
		"system, user, assistant (incomplete), assistant")
	requireEqual(t, "the deleted chat's log", queryRow[string](t, db,
		`SELECT string_agg(x.old_value || '>' || x.new_value, ' ' ORDER BY x.seq) FROM convo.conversation_changes x
		   JOIN convo.conversations c ON c.id = x.conversation_id WHERE c.owner_id = 'customer-12' AND x.field = 'deleted'`),
		"false>true true>false")
	// Every conversation the documents create, by owner.
	requireEqual(t, "conversations by owner", queryRow[string](t, db,
		`SELECT string_agg(format('%s %s', owner_id, n), ', ' ORDER BY owner_id COLLATE "C")
		   FROM (SELECT owner_id, count(*) AS n FROM convo.conversations GROUP BY owner_id) x`),
		readmeOwners)
	if t.Failed() {
		return
	}
	// A reader who follows the documents a second time, on the same
	// database: roles, schemas and functions are made only if missing or
	// replaced, and the ids travel in psql variables, so the conversations
	// made again are new ones.
	runPsql(t, dbURL, "the documents' sql blocks, run a second time on the same database", script, where)
	requireEqual(t, "self_check after the session", queryRow[string](t, db,
		`SELECT coalesce(string_agg(check_name || ': ' || detail, '; '), 'ok') FROM convo.self_check() WHERE NOT ok`), "ok")
}

// readmeOwners is what the documents' session leaves, owner by owner:
// README.md's shop conversation (customer-42) and purchase (customer-7);
// deployment.md's pooled conversation (customer-42) and alice's; erasure.md's
// exported one (customer-7); guide.md's everyday paths (customer-11, and
// customer-12's stopped answer and deleted chat),
// sidebar (customer-3), rendered request (customer-9) and live updates
// (user-live); importing.md's four imports (customer-42); security.md's
// (customer-42).
const readmeOwners = "alice 1, customer-11 1, customer-12 2, customer-3 3, customer-42 7, customer-7 2, customer-9 1, user-live 1"

// docLink matches a Markdown link to a file of the repository, with or
// without an anchor: [text](target#anchor).
var docLink = regexp.MustCompile(`\]\(([^)\s:]*?)(?:#([^)\s]*))?\)`)

// TestDocsLinks: every relative link of README.md, CHANGELOG.md and
// docs/*.md names a file of the repository and, with an anchor, a heading
// of that file (GitHub's anchors), so that moving a section cannot leave a
// link behind.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	files := []string{"../README.md", "../CHANGELOG.md"}
	names, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, names...)
	anchors := map[string]map[string]bool{}
	headings := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		anchors[path] = apiDocAnchors(string(text))
		return anchors[path]
	}
	links := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docLink.FindAllStringSubmatch(string(text), -1) {
			target, anchor := m[1], m[2]
			if strings.HasPrefix(target, "http") || strings.HasPrefix(target, "mailto") {
				continue
			}
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), target)
			}
			links++
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link (%s) names no file", strings.TrimPrefix(f, "../"), m[0][2:len(m[0])-1])
				continue
			}
			if anchor != "" && !headings(path)[anchor] {
				t.Errorf("%s: link (%s) lands on no heading of %s", strings.TrimPrefix(f, "../"), m[0][2:len(m[0])-1],
					strings.TrimPrefix(path, "../"))
			}
		}
	}
	if links < 20 {
		t.Fatalf("only %d links found: the pattern is wrong", links)
	}
}
