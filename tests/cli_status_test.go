package tests

import (
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// emptyDBLogin creates a login role with attrs ("LOGIN", "LOGIN
// CREATEROLE") on the server of the empty database db, makes it the
// database's owner when owner is set, and returns its name and a URL of
// the database as it. The role goes when the test ends, with anything it
// owns there.
func emptyDBLogin(t *testing.T, db *sql.DB, dbURL, attrs string, owner bool) (string, string) {
	t.Helper()
	name := "cli_" + strings.ReplaceAll(newID()[:13], "-", "")
	password := newID()
	dbName := queryStrings(t, db, `SELECT current_database()`)[0]
	if _, err := db.Exec(fmt.Sprintf(`CREATE ROLE %s %s PASSWORD '%s'`, name, attrs, password)); err != nil {
		t.Fatal(err)
	}
	if owner {
		if _, err := db.Exec(fmt.Sprintf(`ALTER DATABASE %s OWNER TO %s`, pgx.Identifier{dbName}.Sanitize(), name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		db.Exec(fmt.Sprintf(`ALTER DATABASE %s OWNER TO CURRENT_USER`, pgx.Identifier{dbName}.Sanitize()))
		db.Exec(`DROP OWNED BY ` + name)
		if _, err := db.Exec(`DROP ROLE ` + name); err != nil {
			t.Errorf("dropping role %s: %v", name, err)
		}
	})
	return name, withUser(t, dbURL, name, password)
}

// historyTable is the migration history table of db, or "" when there is
// none.
func historyTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	return queryStrings(t, db, `SELECT coalesce(to_regclass('public.schema_migrations')::text, '')`)[0]
}

// TestCLIStatusOnlyReads: status and version on a database never migrated
// say version 0 and create nothing, for the superuser and for a role that
// may create nothing (the application's); on a migrated database a role
// that may not read the history is told who can.
func TestCLIStatusOnlyReads(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	before := catalogObjects(t, db)
	latest := latestVersion(t)
	_, plainURL := emptyDBLogin(t, db, dbURL, "LOGIN", false)
	for _, u := range []string{dbURL, plainURL} {
		r := requireCLI(t, nil, 0, []string{fmt.Sprintf("version 0 of %d: not migrated, %d pending", latest, latest)}, "-database", u, "status")
		if !hasLine(r.stdout, "0001", "tree", "pending") {
			t.Fatalf("status lists no pending 0001:\n%s", r.stdout)
		}
		requireCLI(t, nil, 0, []string{"version 0\n"}, "-database", u, "version")
	}
	if got := historyTable(t, db); got != "" {
		t.Fatalf("status created %s", got)
	}
	requireNothingWritten(t, db, "status and version", before)

	migrated := newDB(t)
	app := loginAs(t, migrated, "convo_app")
	for _, verb := range []string{"status", "version"} {
		r := requireCLI(t, nil, 1, nil, "-database", app.Config().ConnString(), verb)
		requireOneError(t, r, fmt.Sprintf("role %s may not read public.schema_migrations, the migration history: "+
			"run this as its owner", app.Config().ConnConfig.User))
		requireOneError(t, r, "(the role that migrates) or a superuser")
		requireOneError(t, r, "GRANT SELECT ON public.schema_migrations TO "+app.Config().ConnConfig.User)
	}
}

// TestCLIUpChecksPrivilegesFirst: a migrating role without CREATEROLE (it
// owns the database, so it may create schemas there) is refused before
// anything runs, in one line naming what it lacks and the grant that
// would do; the database stays at version 0 with nothing created, not even
// the history. With CREATEROLE the same role migrates.
func TestCLIUpChecksPrivilegesFirst(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	before := catalogObjects(t, db)
	name, u := emptyDBLogin(t, db, dbURL, "LOGIN", true)
	for _, args := range [][]string{{"up"}, {"goto", "3"}} {
		r := requireCLI(t, nil, 1, nil, append([]string{"-database", u}, args...)...)
		line := requireOneError(t, r, strings.Join(args, " ")+" refused, nothing was changed: role "+name+" lacks CREATEROLE")
		// The roles may exist already (another test's database made them):
		// then the role cannot act as convo_owner; else it cannot create them.
		want := []string{"acts as convo_owner", "migrate as a role that has it (the role that installed pgconvo, a superuser, " +
			"or a managed server's administrative role), or have one of those run "}
		if strings.Contains(line, "lacks CREATEROLE or membership in convo_owner") {
			want = append(want, "GRANT convo_owner TO "+name, "(then REVOKE convo_owner FROM "+name+")")
		} else {
			want = append(want, "0003_trust creates the roles", "ALTER ROLE "+name+" CREATEROLE")
		}
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Fatalf("want %q in %q", w, line)
			}
		}
		if strings.Contains(line, "CREATE on") {
			t.Fatalf("the database's owner may create there, yet: %s", line)
		}
		if strings.Contains(r.stdout, "applied") {
			t.Fatalf("%v applied a migration:\n%s", args, r.stdout)
		}
	}
	requireNothingWritten(t, db, "a refused up", before)
	if got := historyTable(t, db); got != "" {
		t.Fatalf("the refused up created %s", got)
	}
	requireNoConvoSchema(t, db)
	requireCLI(t, nil, 0, []string{"version 0\n"}, "-database", u, "version")

	// 0001 and 0002 need no role: goto 2 goes.
	requireCLI(t, nil, 0, []string{"0002 effects: applied\nversion 2\n"}, "-database", u, "goto", "2")
	r := requireCLI(t, nil, 1, nil, "-database", u, "up")
	requireOneError(t, r, "up refused, nothing was changed: role "+name+" lacks CREATEROLE")
	requireCLI(t, nil, 0, []string{"version 2\n"}, "-database", u, "version")

	if _, err := db.Exec(`ALTER ROLE ` + name + ` CREATEROLE`); err != nil {
		t.Fatal(err)
	}
	requireCLI(t, nil, 0, []string{fmt.Sprintf("version %d\n", latestVersion(t))}, "-database", u, "up")
	requireCLI(t, nil, 0, []string{"CHECK", "ok"}, "-database", dbURL, "verify") // the migrating role is a member of nothing
}

// TestCLIUpNamesEveryMissingPrivilege: a role that owns nothing is told
// everything it lacks, in one line: CREATE on the public schema and on the
// database, the roles, the grant option.
func TestCLIUpNamesEveryMissingPrivilege(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	before := catalogObjects(t, db)
	name, u := emptyDBLogin(t, db, dbURL, "LOGIN", false)
	dbName := queryStrings(t, db, `SELECT current_database()`)[0]
	r := requireCLI(t, nil, 1, nil, "-database", u, "up")
	line := requireOneError(t, r, "up refused, nothing was changed: role "+name+" lacks CREATE on schema public")
	for _, want := range []string{"CREATE on database " + dbName + " (0001_tree creates schema convo)",
		"CREATE on database " + dbName + " with the grant option", "GRANT CREATE ON SCHEMA public TO " + name,
		"migrate as a role that has them (the role that installed pgconvo, a superuser, or a managed server's administrative role)"} {
		if !strings.Contains(line, want) {
			t.Fatalf("want %q in %q", want, line)
		}
	}
	requireNothingWritten(t, db, "a refused up", before)
}

// TestCLIVerifySaysWhatToDo: verify on a database never migrated says to
// migrate first, naming the command; as a role without the grant it names
// the role to grant; as a member of convo_reader, which may not read the
// history, it verifies.
func TestCLIVerifySaysWhatToDo(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	before := catalogObjects(t, db)
	r := requireCLI(t, nil, 1, nil, "-database", dbURL, "verify")
	requireOneError(t, r, fmt.Sprintf("the database is at version 0 (not migrated): verify runs convo.self_check(), "+
		"which 0003_trust brings; migrate first with `go run ./cmd/migrate -database '%s' up`", dbURL))
	requireNothingWritten(t, db, "verify", before)

	migrated := newDB(t)
	plain := loginAs(t, migrated)
	user := plain.Config().ConnConfig.User
	r = requireCLI(t, nil, 1, nil, "-database", plain.Config().ConnString(), "verify")
	requireOneError(t, r, fmt.Sprintf("role %s may not run convo.self_check(): it is granted to convo_reader", user))
	line := requireOneError(t, r, "GRANT convo_reader TO "+user)
	if !strings.Contains(line, "as the role that installed pgconvo or as a superuser") {
		t.Fatalf("want who may verify named in %q", line)
	}
	if strings.Contains(r.stdout, "CHECK") {
		t.Fatalf("verify printed a table it could not fill:\n%s", r.stdout)
	}
	reader := loginAs(t, migrated, "convo_reader")
	requireCLI(t, nil, 0, []string{"CHECK", "ok"}, "-database", reader.Config().ConnString(), "verify")
}

// TestCLIConnectionErrorsSayWhatToDo: a server that is not there, and a
// database that does not exist, are each one line naming the server and
// what to do, exit 1.
func TestCLIConnectionErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	closed := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable", port)
	for _, verb := range []string{"status", "up", "version", "verify"} {
		r := requireCLI(t, nil, 1, nil, "-database", closed, verb)
		requireOneError(t, r, fmt.Sprintf("nothing answers at 127.0.0.1:%d (connection refused): start PostgreSQL there, "+
			"or fix the host and port in the URL (-database)", port))
	}
	r := requireCLI(t, nil, 1, nil, "-database", closed, "export", "00000000-0000-0000-0000-000000000000")
	requireOneError(t, r, fmt.Sprintf("nothing answers at 127.0.0.1:%d", port))

	u, err := url.Parse(adminURL())
	if err != nil {
		t.Fatal(err)
	}
	name := "nosuch_" + strings.ReplaceAll(newID()[:8], "-", "")
	u.Path = "/" + name
	for _, verb := range []string{"status", "up"} {
		r := requireCLI(t, []string{"DATABASE_URL=" + u.String()}, 1, nil, verb)
		requireOneError(t, r, fmt.Sprintf("database %q does not exist on ", name))
		requireOneError(t, r, fmt.Sprintf(": create it (`createdb %s`, or CREATE DATABASE %s;", name, name))
		requireOneError(t, r, "or fix the database name in the URL (DATABASE_URL)")
	}
}
