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
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// cli is the migrate command, built once per test run by migrateBinary and
// removed by TestMain.
var cli struct {
	once sync.Once
	dir  string
	err  error
}

// migrateBinary builds ./cmd/migrate into a temporary directory, once, and
// returns the program's path.
func migrateBinary(t *testing.T) string {
	t.Helper()
	cli.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			cli.err = fmt.Errorf("finding the go command to build cmd/migrate: %w", err)
			return
		}
		if cli.dir, cli.err = os.MkdirTemp("", "pgconvo-cli-"); cli.err != nil {
			return
		}
		out, err := exec.Command(goTool, "build", "-o", filepath.Join(cli.dir, "migrate"), "../cmd/migrate").CombinedOutput()
		if err != nil {
			cli.err = fmt.Errorf("building cmd/migrate: %w\n%s", err, out)
		}
	})
	if cli.err != nil {
		t.Fatal(cli.err)
	}
	return filepath.Join(cli.dir, "migrate")
}

// removeMigrateBinary removes what migrateBinary built.
func removeMigrateBinary() {
	if cli.dir != "" {
		os.RemoveAll(cli.dir)
	}
}

// cliRun is one run of the migrate command.
type cliRun struct {
	stdout, stderr string
	code           int
}

// runCLI runs the migrate command with args in an empty directory (so that
// nothing can reach a local server under .pgconvo/ by mistake), with
// DATABASE_URL unset unless env sets it.
func runCLI(t *testing.T, env []string, args ...string) cliRun {
	t.Helper()
	return runCLIIn(t, t.TempDir(), env, args...)
}

// runCLIIn runs the migrate command with args in dir, with DATABASE_URL
// unset unless env sets it.
func runCLIIn(t *testing.T, dir string, env []string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(migrateBinary(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running migrate %v: %v", args, err)
	}
	return cliRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// requireCLI runs the migrate command and fails the test unless it exits
// with code and its output holds every one of want.
func requireCLI(t *testing.T, env []string, code int, want []string, args ...string) cliRun {
	t.Helper()
	r := runCLI(t, env, args...)
	all := r.stdout + r.stderr
	if r.code != code {
		t.Fatalf("migrate %s: exit code %d, want %d; output:\n%s", strings.Join(args, " "), r.code, code, all)
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Fatalf("migrate %s: want %q in the output:\n%s", strings.Join(args, " "), w, all)
		}
	}
	return r
}

// allMigrations returns the embedded migration set.
func allMigrations(t *testing.T) []migrator.Migration {
	t.Helper()
	all, err := migrator.List(pgconvosql.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// stepLines spells what the CLI prints for migrations from..to (1-based,
// in the order given) being applied or reverted.
func stepLines(all []migrator.Migration, what string, versions ...int) string {
	var lines []string
	for _, v := range versions {
		lines = append(lines, fmt.Sprintf("%04d %s: %s", v, all[v-1].Name, what))
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestCLIReportsWhatItDid drives up, status, goto and down through the
// command: each names the database it looked at, up and down say what they
// applied or reverted one line a migration (or "no change"), status is a
// table, and down -all on a database holding no rows needs no flag.
func TestCLIReportsWhatItDid(t *testing.T) {
	t.Parallel()
	_, dbURL := newEmptyDB(t)
	all := allMigrations(t)
	latest := len(all)
	db := []string{"-database", dbURL}
	named := "database: " + dbURL + " (from -database)\n"

	r := requireCLI(t, nil, 0, nil, append(db, "goto", "1")...)
	if want := named + stepLines(all, "applied", 1) + "version 1\n"; r.stdout != want {
		t.Fatalf("goto 1 printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = requireCLI(t, nil, 0, nil, append(db, "status")...)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(all)+3 || lines[0]+"\n" != named || !hasRow(lines[1], "VERSION", "NAME", "STATE") ||
		lines[len(lines)-1] != fmt.Sprintf("version 1 of %d, %d pending", latest, latest-1) {
		t.Fatalf("status printed:\n%s", r.stdout)
	}
	for i, m := range all {
		state := "pending"
		if m.Version == 1 {
			state = "applied"
		}
		if !hasRow(lines[2+i], fmt.Sprintf("%04d", m.Version), m.Name, state) {
			t.Fatalf("status row %d is %q, want %04d %s %s", i+1, lines[2+i], m.Version, m.Name, state)
		}
	}

	var rest []int
	for v := 2; v <= latest; v++ {
		rest = append(rest, v)
	}
	r = requireCLI(t, []string{"DATABASE_URL=" + dbURL}, 0, nil, "up")
	if want := "database: " + dbURL + " (from DATABASE_URL)\n" + stepLines(all, "applied", rest...) +
		fmt.Sprintf("version %d\n", latest); r.stdout != want {
		t.Fatalf("up printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = requireCLI(t, nil, 0, nil, append(db, "up")...)
	if want := named + "no change\n" + fmt.Sprintf("version %d\n", latest); r.stdout != want {
		t.Fatalf("a second up printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	requireCLI(t, nil, 0, []string{fmt.Sprintf("version %d of %d: up to date", latest, latest)}, append(db, "status")...)
	requireCLI(t, nil, 0, []string{named + fmt.Sprintf("version %d\n", latest)}, append(db, "version")...)

	var down []int
	for v := latest; v >= 1; v-- {
		down = append(down, v)
	}
	r = requireCLI(t, nil, 0, nil, append(db, "down", "-all")...)
	if want := named + stepLines(all, "reverted", down...) + "version 0\n"; r.stdout != want {
		t.Fatalf("down -all printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	requireCLI(t, nil, 0, []string{"no change\nversion 0\n"}, append(db, "down", "-all")...)
}

// TestCLIRefusesDataLoss: down and goto refuse to drop tables holding rows,
// name them with their counts, exit 1 and change nothing, until given
// -force-data-loss; a step that drops no table with rows goes ahead.
func TestCLIRefusesDataLoss(t *testing.T) {
	t.Parallel()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
	latest := latestVersion(t)
	db := []string{"-database", dbURL}
	if err := m.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, `SELECT convo.create_conversation('owner-1', 'You are helpful.')`)
	mustExec(t, pool, `SELECT convo.register_tool('buy', true, '{"type": "object"}')`)

	refused := func(args ...string) cliRun {
		t.Helper()
		r := requireCLI(t, nil, 1, []string{"refused", "would drop tables that hold rows",
			"nothing was changed", "-force-data-loss"}, append(db, args...)...)
		if strings.Contains(r.stdout, "reverted") {
			t.Fatalf("migrate %v refused yet reverted:\n%s", args, r.stdout)
		}
		return r
	}
	r := refused("down", "-all")
	if !strings.Contains(r.stderr, fmt.Sprintf("going from version %d to 0", latest)) {
		t.Fatalf("down -all should name the versions:\n%s", r.stderr)
	}
	for _, table := range []string{"convo.conversations", "convo.messages", "convo.tools"} {
		if !hasLine(r.stderr, table, "1", "row") {
			t.Fatalf("down -all: want %s with 1 row in:\n%s", table, r.stderr)
		}
	}
	requireVersion(t, m, latest)

	requireCLI(t, nil, 0, []string{"version 2\n"}, append(db, "goto", "2")...) // 0003 drops no table.
	r = refused("goto", "1")
	if !hasLine(r.stderr, "convo.tools", "1", "row") || strings.Contains(r.stderr, "convo.conversations") {
		t.Fatalf("goto 1 should name convo.tools alone:\n%s", r.stderr)
	}
	refused("down", "1")
	requireVersion(t, m, 2)

	requireCLI(t, nil, 0, []string{"0002 effects: reverted\nversion 1\n"}, append(db, "down", "1", "-force-data-loss")...)
	refused("goto", "0")
	requireCLI(t, nil, 0, []string{"0001 tree: reverted\nversion 0\n"}, append(db, "-force-data-loss", "down", "-all")...)
	requireCLI(t, nil, 2, []string{"-force-data-loss goes with down or goto, not up"}, append(db, "up", "-force-data-loss")...)
	requireVersion(t, m, 0)
}

// TestCLIForceAndGotoRefuseUnknownVersions: force takes 0, -1 or a version
// of the migration set; goto 0 or a version of the set.
func TestCLIForceAndGotoRefuseUnknownVersions(t *testing.T) {
	t.Parallel()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	latest := latestVersion(t)
	db := []string{"-database", dbURL}
	beyond := fmt.Sprint(latest + 1)
	requireCLI(t, nil, 1, []string{"there is no migration " + beyond, "nothing was recorded"}, append(db, "force", beyond)...)
	requireCLI(t, nil, 1, []string{"there is no migration " + beyond}, append(db, "goto", beyond)...)
	requireCLI(t, nil, 2, []string{"V must be a version number"}, append(db, "force", "-2")...)
	requireVersion(t, m, 0)
	requireCLI(t, nil, 0, []string{"version 1\n"}, append(db, "force", "1")...)
	requireCLI(t, nil, 0, []string{"version 0\n"}, append(db, "force", "-1")...)
	requireCLI(t, nil, 0, []string{"version 0\n"}, append(db, "force", "0")...)
}

// TestCLIDirtyHintRepeatsDatabase: on a dirty database the way out repeats
// the -database given (password masked) or "$DATABASE_URL", so that pasting
// it cannot reach the local server instead; the output names the database
// with its password masked.
func TestCLIDirtyHintRepeatsDatabase(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	latest := latestVersion(t)
	if err := m.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if password, _ := u.User.Password(); password == "" {
		u.User = url.UserPassword(u.User.Username(), "not-the-password") // The test server trusts.
	}
	password, _ := u.User.Password()
	masked := u.Redacted()

	for _, verb := range []string{"version", "status", "up"} {
		r := requireCLI(t, nil, 1, []string{
			"database: " + masked + " (from -database)\n",
			fmt.Sprintf("`go run ./cmd/migrate -database '%s' force %d` (to retry %d)", masked, latest-1, latest),
			fmt.Sprintf("`go run ./cmd/migrate -database '%s' force %d` (if %d did finish)", masked, latest, latest),
		}, "-database", u.String(), verb)
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Fatalf("%s printed the password:\n%s%s", verb, r.stdout, r.stderr)
		}
	}
	requireCLI(t, []string{"DATABASE_URL=" + u.String()}, 1, []string{
		fmt.Sprintf("`go run ./cmd/migrate -database \"$DATABASE_URL\" force %d`", latest-1),
	}, "version")
	r := requireCLI(t, nil, 1, nil, "-database", dbURL, "status")
	if !hasLine(r.stdout, fmt.Sprintf("%04d", latest), allMigrations(t)[latest-1].Name, "dirty", "(failed", "half", "way)") {
		t.Fatalf("status should mark %d dirty:\n%s", latest, r.stdout)
	}
	// The way out it prints works: force clears the mark, and the database
	// is clean at that version.
	requireCLI(t, nil, 0, nil, "-database", dbURL, "force", fmt.Sprint(latest))
	requireCLI(t, nil, 0, []string{fmt.Sprintf("version %d\n", latest)}, "-database", dbURL, "version")
}

// hasRow reports whether line's words are want.
func hasRow(line string, want ...string) bool {
	return strings.Join(strings.Fields(line), " ") == strings.Join(want, " ")
}

// hasLine reports whether a line of out has the words want.
func hasLine(out string, want ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if hasRow(line, want...) {
			return true
		}
	}
	return false
}

// TestNoServerMessageNamesTestVariable: without server binaries, go test
// points at PGCONVO_TEST_DATABASE_URL, not the CLI's DATABASE_URL.
func TestNoServerMessageNamesTestVariable(t *testing.T) {
	t.Parallel()
	got := pgtest.NoServerMessage(fmt.Errorf("finding binaries: %w", localpg.ErrNoBinaries))
	if !strings.Contains(got, "PGCONVO_TEST_DATABASE_URL") || strings.Contains(strings.ReplaceAll(got, "PGCONVO_TEST_DATABASE_URL", ""), "DATABASE_URL") {
		t.Fatalf("message: %s", got)
	}
	if !strings.Contains(got, "apt-get install postgresql") {
		t.Fatalf("message says nothing of installing PostgreSQL: %s", got)
	}
}

// TestCLITwoUpsAtOnce: two `up` on one empty database at once both succeed,
// one applying every migration and the other finding nothing to do: the
// second waits for the first's migration lock before it reads the history
// (which the first marks dirty while it runs) to check its privileges.
func TestCLITwoUpsAtOnce(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	migrateBinary(t) // built here: a goroutine may not end the test
	done := make(chan cliRun, 2)
	go func() { done <- runCLI(t, nil, "-database", dbURL, "up") }()
	// The second starts while the first is half way through a migration.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var dirty bool
		if err := db.QueryRow(`SELECT dirty FROM public.schema_migrations`).Scan(&dirty); err == nil && dirty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first up never showed a migration half way")
		}
		time.Sleep(2 * time.Millisecond)
	}
	go func() { done <- runCLI(t, nil, "-database", dbURL, "up") }()
	latest := latestVersion(t)
	applied := 0
	for i := 0; i < 2; i++ {
		r := <-done
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("version %d\n", latest)) {
			t.Fatalf("an up run at the same time as another: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, ": applied\n") {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d of the two runs applied migrations, want exactly one (the other waits, then finds nothing to do)", applied)
	}
}
