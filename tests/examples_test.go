package tests

import (
	"context"
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

// The examples tell the first seed's purchase story from psql, Node.js and
// Python. TestExamples runs each twice on a fresh database, as a deployment
// would: DATABASE_URL a login member of convo_app, ADMIN_DATABASE_URL a
// login member of convo_admin. Each example checks what it prints and exits
// non-zero on a mismatch; the test then reads the ledger each run left.

// examplePython is the interpreter that sees Debian's python3-psycopg; a
// python3 earlier on PATH (pyenv, a venv) may not.
const examplePython = "/usr/bin/python3"

// missingTool fails the test in CI (CI set, as .ci/run sets it) and skips
// it elsewhere: an example's language missing from a developer's machine
// need not stop the suite, but CI must run every example.
func missingTool(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
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

// runExample runs cmd from the repository root with env added, and fails
// the test, showing the output, unless it exits 0.
func runExample(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestExamples runs the purchase story in each language twice on a fresh
// database and checks both runs' ledgers.
func TestExamples(t *testing.T) {
	t.Parallel()
	examples := []struct {
		name string
		cmd  func(t *testing.T, appURL string) []string
	}{
		{"psql", func(t *testing.T, appURL string) []string {
			return []string{psqlPath(t), "-X", "-v", "ON_ERROR_STOP=1", appURL, "-f", "examples/purchase.sql"}
		}},
		{"node", func(t *testing.T, _ string) []string {
			node, err := exec.LookPath("node")
			if err != nil {
				missingTool(t, "node is not on PATH (install Node.js)")
			}
			if _, err := os.Stat("../examples/node/node_modules/pg/package.json"); err != nil {
				missingTool(t, "examples/node has no node_modules/pg: run `npm ci` in examples/node")
			}
			return []string{node, "examples/node/purchase.js"}
		}},
		{"python", func(t *testing.T, _ string) []string {
			if !isExecutable(examplePython) {
				missingTool(t, "%s is missing (apt-get install python3)", examplePython)
			}
			if out, err := exec.Command(examplePython, "-c", "import psycopg").CombinedOutput(); err != nil {
				missingTool(t, "%s cannot import psycopg (apt-get install python3-psycopg): %s", examplePython, out)
			}
			return []string{examplePython, "examples/python/purchase.py"}
		}},
	}
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			app, appURL := loginURL(t, db, "convo_app")
			_, adminURL := loginURL(t, db, "convo_admin")
			argv := ex.cmd(t, appURL)
			env := []string{"DATABASE_URL=" + appURL, "ADMIN_DATABASE_URL=" + adminURL}
			for run := 1; run <= 2; run++ {
				out := runExample(t, env, argv[0], argv[1:]...)
				if !strings.Contains(out, "ok: examples/") {
					t.Fatalf("run %d did not say ok:\n%s", run, out)
				}
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
