package tests

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/localpg"
)

// The examples tell the first seed's purchase story from psql, Node.js,
// Python and Go. TestExamples runs each twice on a fresh database, as a
// deployment would: DATABASE_URL a login member of convo_app,
// ADMIN_DATABASE_URL a login member of convo_admin. Each example checks
// what it prints and exits non-zero on a mismatch; the test then reads the
// ledger each run left. The other tests here hold each example to README.md's
// registration of purchase_credits and to one line, saying what to do, for
// each way it can stop (tests/pgbouncer_test.go runs them through PgBouncer).

// examplePython is the interpreter that sees Debian's python3-psycopg; a
// python3 earlier on PATH (pyenv, a venv) may not.
const examplePython = "/usr/bin/python3"

// missingTool fails the test in CI (CI set, as .ci/run sets it) and skips
// it elsewhere: an example's language missing from a developer's machine
// need not stop the suite, but CI must run every example.
func missingTool(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("%s (CI is set, so this fails instead of skipping)", msg)
	}
	t.Skipf("%s; skipped because CI is not set", msg)
}

// psqlPath finds psql the way internal/localpg finds the server binaries:
// beside them first, then on PATH. psql comes with the server, which the
// suite needs anyway, so a missing psql fails the test.
func psqlPath(t *testing.T) string {
	t.Helper()
	if dir, err := localpg.FindBinaries(); err == nil {
		if p := filepath.Join(dir, "psql"); isExecutable(p) {
			return p
		}
	}
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	if isExecutable("/usr/bin/psql") {
		return "/usr/bin/psql"
	}
	t.Fatalf("no psql beside the server binaries or on PATH: %s", localpg.InstallHint)
	return ""
}

// isExecutable reports whether path is an executable file.
func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// loginURL creates a LOGIN role that is a member of each of roles and
// returns its name and a URL on db's database connected as it; the role is
// dropped when the test ends.
func loginURL(t *testing.T, db *pgxpool.Pool, roles ...string) (name, dbURL string) {
	t.Helper()
	name = "login_" + strings.ReplaceAll(newID()[:13], "-", "")
	password := newID()
	mustExec(t, db, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE %s`,
		pgx.Identifier{name}.Sanitize(), password, strings.Join(roles, ", ")))
	t.Cleanup(func() {
		if _, err := db.Exec(context.Background(), `DROP ROLE `+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("dropping role %s: %v", name, err)
		}
	})
	u, err := url.Parse(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	return name, u.String()
}

// exampleEnv is the test's environment without DATABASE_URL and
// ADMIN_DATABASE_URL, plus env.
func exampleEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "ADMIN_DATABASE_URL=") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// exampleRun is one run of an example.
type exampleRun struct {
	stdout, stderr string
	code           int
}

// startExample runs argv from the repository root (or dir, when given)
// with only env's database URLs, and returns what it printed and its exit
// code.
func startExample(t *testing.T, dir string, env []string, argv ...string) exampleRun {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = ".."
	if dir != "" {
		cmd.Dir = dir
	}
	cmd.Env = exampleEnv(env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running %s: %v", strings.Join(argv, " "), err)
	}
	return exampleRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// runExample runs argv from the repository root with env, and fails the
// test, showing the output, unless it exits 0 and says ok.
func runExample(t *testing.T, env []string, argv ...string) string {
	t.Helper()
	r := startExample(t, "", env, argv...)
	if r.code != 0 || !strings.Contains(r.stdout, "ok: examples/") {
		t.Fatalf("%s: exit %d, want 0 and ok:\n%s%s", strings.Join(argv, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// requireOneLine fails the test unless the run exited non-zero and printed
// exactly one line on stderr, holding want.
func requireOneLine(t *testing.T, what string, r exampleRun, want string) {
	t.Helper()
	line := strings.TrimSuffix(r.stderr, "\n")
	if r.code == 0 || line == "" || strings.Contains(line, "\n") || !strings.Contains(line, want) {
		t.Fatalf("%s: want a non-zero exit and one line on stderr holding %q; got exit %d, stderr:\n%s\nstdout:\n%s",
			what, want, r.code, r.stderr, r.stdout)
	}
	t.Logf("%s: %s", what, line)
}

// example is one language's purchase story: argv returns its command line,
// skipping (or, in CI, failing) the test when its language is missing.
type example struct {
	name string
	argv func(t *testing.T, appURL string) []string
}

// examples are the purchase story in every language.
var examples = []example{
	{"psql", func(t *testing.T, appURL string) []string {
		return []string{psqlPath(t), "-X", "-v", "ON_ERROR_STOP=1", appURL, "-f", "examples/purchase.sql"}
	}},
	{"node", func(t *testing.T, _ string) []string {
		return []string{nodePath(t), "examples/node/purchase.js"}
	}},
	{"python", func(t *testing.T, _ string) []string {
		return []string{pythonPath(t), "examples/python/purchase.py"}
	}},
	{"go", func(t *testing.T, _ string) []string {
		return []string{goExample(t)}
	}},
}

// languageExamples are the examples in a language of their own (not psql),
// which read DATABASE_URL themselves.
func languageExamples() []example { return examples[1:] }

// nodePath returns node, with examples/node's packages installed.
func nodePath(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missingTool(t, "node is not on PATH (install Node.js)")
	}
	if _, err := os.Stat("../examples/node/node_modules/pg/package.json"); err != nil {
		missingTool(t, "examples/node has no node_modules/pg: run `npm ci` in examples/node")
	}
	return node
}

// pythonPath returns /usr/bin/python3, which can import psycopg.
func pythonPath(t *testing.T) string {
	t.Helper()
	if !isExecutable(examplePython) {
		missingTool(t, "%s is missing (apt-get install python3)", examplePython)
	}
	if out, err := exec.Command(examplePython, "-c", "import psycopg").CombinedOutput(); err != nil {
		missingTool(t, "%s cannot import psycopg (apt-get install python3-psycopg): %s", examplePython, out)
	}
	return examplePython
}

// goExample builds examples/go/purchase into the test's temporary
// directory and returns the program's path.
func goExample(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("finding the go command to build examples/go/purchase: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "purchase")
	cmd := exec.Command(goTool, "build", "-o", bin, "./examples/go/purchase")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/go/purchase: %v\n%s", err, out)
	}
	return bin
}

// TestExamples runs the purchase story in each language twice on a fresh
// database and checks both runs' ledgers.
func TestExamples(t *testing.T) {
	t.Parallel()
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			app, appURL := loginURL(t, db, "convo_app")
			_, adminURL := loginURL(t, db, "convo_admin")
			argv := ex.argv(t, appURL)
			env := []string{"DATABASE_URL=" + appURL, "ADMIN_DATABASE_URL=" + adminURL}
			for run := 1; run <= 2; run++ {
				runExample(t, env, argv...)
			}
			convs := queryRowsAs[string](t, db,
				`SELECT id::text FROM convo.conversations WHERE owner_id = 'customer-7' ORDER BY created_at`)
			if len(convs) != 2 {
				t.Fatalf("two runs made %d conversations, want 2: %v", len(convs), convs)
			}
			for _, conv := range convs {
				requirePurchaseStory(t, db, conv, app)
			}
			requireCount(t, db, 1, `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`)
		})
	}
}

// readmeRegistration is README.md's registration of purchase_credits, the
// statement of its first sql block, as written there.
func readmeRegistration(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(text), "SELECT convo.register_tool('purchase_credits'")
	if start < 0 {
		t.Fatal("README.md no longer registers purchase_credits with SELECT convo.register_tool('purchase_credits', ...")
	}
	end := strings.Index(string(text[start:]), ";\n")
	if end < 0 {
		t.Fatal("README.md's registration of purchase_credits does not end with ;")
	}
	return string(text[start : start+end+1])
}

// otherRegistration registers purchase_credits with settings README.md
// does not: the examples' schema before they matched it (a maximum).
const otherRegistration = `SELECT convo.register_tool('purchase_credits', true,
       '{"type": "object", "required": ["amount_minor", "currency"], "additionalProperties": false,
         "properties": {"amount_minor": {"type": "integer", "minimum": 1, "maximum": 100000},
                        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}',
       p_idempotency_scope => 'fork_args', p_amount_arg => 'amount_minor', p_currency_arg => 'currency')`

// otherSettingsLine is what every example says, and stops at, when
// purchase_credits is registered with other settings (version 1 here).
const otherSettingsLine = "purchase_credits is registered with other settings (version 1); the example expects the settings " +
	"README.md registers (its first sql block): run it on a database where purchase_credits is registered so, or not at all"

// TestExamplesAfterReadme: followed after README.md's first block (the
// superuser registers purchase_credits as written there), every example
// finds that registration (version 1, no new version) and tells its story;
// with purchase_credits registered with other settings, every example says
// so in one line, exits non-zero, and registers and writes nothing.
func TestExamplesAfterReadme(t *testing.T) {
	t.Parallel()
	registration := readmeRegistration(t)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			t.Run("README's registration", func(t *testing.T) {
				t.Parallel()
				db := newDB(t)
				mustExec(t, db, registration)
				_, appURL := loginURL(t, db, "convo_app")
				_, adminURL := loginURL(t, db, "convo_admin")
				out := runExample(t, []string{"DATABASE_URL=" + appURL, "ADMIN_DATABASE_URL=" + adminURL}, ex.argv(t, appURL)...)
				if !strings.Contains(out, "purchase_credits: version 1\n") {
					t.Fatalf("want the example to find version 1:\n%s", out)
				}
				requireCount(t, db, 1, `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`)
				requireCount(t, db, 1, `SELECT count(*) FROM convo.conversations WHERE owner_id = 'customer-7'`)
			})
			t.Run("other settings", func(t *testing.T) {
				t.Parallel()
				db := newDB(t)
				mustExec(t, db, otherRegistration)
				_, appURL := loginURL(t, db, "convo_app")
				_, adminURL := loginURL(t, db, "convo_admin")
				r := startExample(t, "", []string{"DATABASE_URL=" + appURL, "ADMIN_DATABASE_URL=" + adminURL}, ex.argv(t, appURL)...)
				requireOneLine(t, ex.name, r, otherSettingsLine)
				requireCount(t, db, 1, `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`)
				requireCount(t, db, 0, `SELECT count(*) FROM convo.conversations`)
			})
		})
	}
}

// TestExamplesWithoutDatabaseURL: each example in a language of its own,
// run with no DATABASE_URL, says in one line what to export, and exits 1.
func TestExamplesWithoutDatabaseURL(t *testing.T) {
	t.Parallel()
	for _, ex := range languageExamples() {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			r := startExample(t, "", nil, ex.argv(t, "")...)
			requireOneLine(t, ex.name, r, ": DATABASE_URL is not set: export the URL `go run ./cmd/migrate up` printed")
			requireEqual(t, "exit code", r.code, 1)
		})
	}
}

// TestExamplesWithoutAdmin: each example in a language of its own, run as
// the application with no ADMIN_DATABASE_URL, is refused the allowlist
// (convo_admin's) and says in one line which URL to set.
func TestExamplesWithoutAdmin(t *testing.T) {
	t.Parallel()
	for _, ex := range languageExamples() {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			_, appURL := loginURL(t, db, "convo_app")
			r := startExample(t, "", []string{"DATABASE_URL=" + appURL}, ex.argv(t, appURL)...)
			requireOneLine(t, ex.name, r, "(SQLSTATE 42501); register_tool is the DBA's: set ADMIN_DATABASE_URL to a login member of convo_admin")
			requireCount(t, db, 0, `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`)
		})
	}
}

// TestExamplesWithoutDriver: the Node.js example without its pg package
// (a copy outside examples/node) and the Python one without psycopg
// (python3 -S, which leaves Debian's packages off the path) say in one line
// what to install. The Go example has no such case: pgx is compiled in.
func TestExamplesWithoutDriver(t *testing.T) {
	t.Parallel()
	t.Run("node", func(t *testing.T) {
		t.Parallel()
		node := nodePath(t)
		dir := t.TempDir()
		copyFile(t, "../examples/node/purchase.js", filepath.Join(dir, "purchase.js"))
		r := startExample(t, dir, []string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "NODE_PATH="}, node, "purchase.js")
		requireOneLine(t, "node", r, "examples/node/purchase.js: the pg package is missing: run `npm ci` in examples/node")
	})
	t.Run("python", func(t *testing.T) {
		t.Parallel()
		python := pythonPath(t)
		r := startExample(t, "", []string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none"}, python, "-S", "examples/python/purchase.py")
		requireOneLine(t, "python", r, "examples/python/purchase.py: psycopg 3 is missing for "+python+
			": apt-get install python3-psycopg, and run the example with /usr/bin/python3")
	})
}

// copyFile copies from to to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// requirePurchaseStory checks the ledger one run of an example left in
// conv: one charge, reused by the typo fix and compensated by a refund; one
// confirmed re-run for 700 under a key of its own, applied; every
// transition logged in order, by the application's role (app) but the
// confirmation; nothing orphaned at the end.
func requirePurchaseStory(t *testing.T, db *pgxpool.Pool, conv, app string) {
	t.Helper()
	p1 := effForCall(t, db, conv, "toolu_p1")
	p2 := effForCall(t, db, conv, "toolu_p2")
	p3 := effForCall(t, db, conv, "toolu_p3")
	requireEqual(t, "toolu_p1", p1, effDecision{EffectID: p1.EffectID, Decision: "execute", State: "compensated",
		Key: p1.Key, ExternalRef: p1.ExternalRef, HTTPStatus: 200})
	requireEqual(t, "toolu_p2 (the typo fix)", p2, effDecision{EffectID: p1.EffectID, Decision: "reuse", State: "compensated",
		Key: p1.Key, ExternalRef: p1.ExternalRef, HTTPStatus: 200})
	requireEqual(t, "toolu_p3 (700 instead)", p3, effDecision{EffectID: p3.EffectID, Decision: "confirm", State: "applied",
		Key: "rerun:" + p3.EffectID + ":of:" + p1.EffectID, ExternalRef: p3.ExternalRef, HTTPStatus: 200})
	if !effScopeKeyPattern.MatchString(p1.Key) || !strings.HasPrefix(p1.Key, "fork_args:") {
		t.Fatalf("toolu_p1's key %q is not fork_args:<sha256 hex>", p1.Key)
	}
	if !strings.HasPrefix(p1.ExternalRef, "ch_") || !strings.HasPrefix(p3.ExternalRef, "ch_") || p1.ExternalRef == p3.ExternalRef {
		t.Fatalf("want two charges, got %q and %q", p1.ExternalRef, p3.ExternalRef)
	}
	requireCount(t, db, 2, `SELECT count(*) FROM convo.tool_effects WHERE conversation_id = $1`, conv)
	requireCount(t, db, 3, `SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1`, conv)

	e1 := effRead(t, db, conv, p1.EffectID)
	e3 := effRead(t, db, conv, p3.EffectID)
	requireEqual(t, "charge", [4]string{e1.Currency, e1.ToolName, e1.RepeatsEffectID, e1.CompensatedBy[:3]},
		[4]string{"EUR", "purchase_credits", "", "re_"})
	requireEqual(t, "charge amount", e1.AmountMinor, int64(500))
	requireEqual(t, "re-run", [3]string{e3.RepeatsEffectID, e3.ConfirmedBy, e3.Currency}, [3]string{p1.EffectID, "support:ana", "EUR"})
	requireEqual(t, "re-run amount", e3.AmountMinor, int64(700))

	requireSlice(t, "events", effEvents(t, db, conv), []effEvent{
		{p1.EffectID, "requested", "pending", app, `{}`},
		{p1.EffectID, "pending", "applied", app, `{"processor": "ok"}`},
		{p3.EffectID, "requested", "awaiting_confirmation", app, `{}`},
		{p3.EffectID, "awaiting_confirmation", "pending", "support:ana", `{}`},
		{p3.EffectID, "pending", "applied", app, `{}`},
		{p1.EffectID, "applied", "compensated", app, `{"reason": "customer changed the amount"}`},
	})
	requireSlice(t, "orphaned at the end", effOrphanIDs(t, db, conv), nil)
	root := queryRow[string](t, db, `SELECT id::text FROM convo.messages WHERE conversation_id = $1 AND parent_id IS NULL`, conv)
	for _, call := range []string{"toolu_p1", "toolu_p2", "toolu_p3"} {
		requireEqual(t, "fork point of "+call, effLink(t, db, conv, call).ForkPointID, root)
	}
	// The CV001 attempt wrote nothing: the last head move is the re-run's answer.
	requireEqual(t, "the head is the 700 call's message", headOf(t, db, conv), effLink(t, db, conv, "toolu_p3").MessageID)
}

// TestExampleChecksCanFail: the psql example's checks stop it with a
// non-zero exit when the story differs (a check that expects the typo fix
// to be executed again, not reused).
func TestExampleChecksCanFail(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	_, appURL := loginURL(t, db, "convo_app")
	_, adminURL := loginURL(t, db, "convo_admin")
	script, err := os.ReadFile("../examples/purchase.sql")
	if err != nil {
		t.Fatal(err)
	}
	check := `:'decision' = 'reuse' AND :'state' = 'applied'`
	if !strings.Contains(string(script), check) {
		t.Fatalf("examples/purchase.sql no longer holds the check %s", check)
	}
	broken := filepath.Join(t.TempDir(), "purchase.sql")
	if err := os.WriteFile(broken, []byte(strings.Replace(string(script), check, `:'decision' = 'execute' AND :'state' = 'applied'`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(psqlPath(t), "-X", "-v", "ON_ERROR_STOP=1", appURL, "-f", broken)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+appURL, "ADMIN_DATABASE_URL="+adminURL)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no rows returned for \\gset") || strings.Contains(string(out), "ok: examples/") {
		t.Fatalf("a failing check should stop the script with a non-zero exit; got %v:\n%s", err, out)
	}
}

// TestExampleChecksFailInOneLine: the Node.js and Python examples, changed
// to expect the typo fix to be executed again instead of reused (a copy
// outside the repository), stop at that check with one line that names it,
// what it got and wanted, and what to do. (The Go example's checks stop the
// same way: TestExamplesAfterReadme's other settings are one.)
func TestExampleChecksFailInOneLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, file, check, broken string
		argv                      func(t *testing.T, script string) ([]string, []string)
	}{
		{"node", "examples/node/purchase.js",
			`['reuse', 'applied', ch1, 'report outcome']`, `['execute', 'applied', ch1, 'report outcome']`,
			func(t *testing.T, script string) ([]string, []string) {
				modules, err := filepath.Abs("../examples/node/node_modules")
				if err != nil {
					t.Fatal(err)
				}
				return []string{nodePath(t), script}, []string{"NODE_PATH=" + modules}
			}},
		{"python", "examples/python/purchase.py",
			`("reuse", "applied", ch1, "report outcome")`, `("execute", "applied", ch1, "report outcome")`,
			func(t *testing.T, script string) ([]string, []string) {
				return []string{pythonPath(t), script}, nil
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			source, err := os.ReadFile(filepath.Join("..", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(source), c.check) {
				t.Fatalf("%s no longer holds the check %s", c.file, c.check)
			}
			script := filepath.Join(t.TempDir(), filepath.Base(c.file))
			if err := os.WriteFile(script, []byte(strings.Replace(string(source), c.check, c.broken, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			argv, env := c.argv(t, script)
			db := newDB(t)
			_, appURL := loginURL(t, db, "convo_app")
			_, adminURL := loginURL(t, db, "convo_admin")
			r := startExample(t, "", append(env, "DATABASE_URL="+appURL, "ADMIN_DATABASE_URL="+adminURL), argv...)
			requireOneLine(t, c.name, r, ": check failed: toolu_p2: got ")
			requireOneLine(t, c.name, r, "migrate it with this checkout (`go run ./cmd/migrate up`) and run the example again")
		})
	}
}
