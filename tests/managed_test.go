package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/migrator"
)

// managedDBA is a role as a managed server hands one out: LOGIN CREATEDB
// CREATEROLE, no superuser. Its databases are ones it created itself (so
// it owns them). Everything goes when the test ends.
type managedDBA struct {
	name, password string
	super          *sql.DB // the server's superuser, on its maintenance database
}

// newManagedDBA creates the role.
func newManagedDBA(t *testing.T) *managedDBA {
	t.Helper()
	super, err := sql.Open("pgx", adminURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { super.Close() })
	d := &managedDBA{name: "dba_" + strings.ReplaceAll(newID()[:13], "-", ""), password: newID(), super: super}
	if _, err := super.Exec(fmt.Sprintf(`CREATE ROLE %s LOGIN CREATEDB CREATEROLE PASSWORD '%s'`, d.name, d.password)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Databases go first (their cleanups were registered later), then
		// the roles the DBA made, then the DBA.
		super.Exec(fmt.Sprintf(`DO $$
			DECLARE r text;
			BEGIN
			    FOR r IN SELECT m.rolname FROM pg_roles m WHERE m.rolname LIKE 'app\_%%'
			                AND EXISTS (SELECT 1 FROM pg_auth_members a WHERE a.member = m.oid AND a.grantor = %s::regrole) LOOP
			        EXECUTE format('DROP ROLE %%I', r);
			    END LOOP;
			END $$`, pgx.Identifier{d.name}.Sanitize()))
		if _, err := super.Exec(`DROP ROLE ` + d.name); err != nil {
			t.Errorf("dropping role %s: %v", d.name, err)
		}
	})
	return d
}

// createDB creates a database as the DBA and returns its URL as the DBA
// and as the superuser.
func (d *managedDBA) createDB(t *testing.T) (dbaURL, superURL string) {
	t.Helper()
	name := "managed_" + strings.ReplaceAll(newID()[:13], "-", "")
	own, err := sql.Open("pgx", withUser(t, adminURL(), d.name, d.password))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if _, err := own.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("creating a database as %s: %v", d.name, err)
	}
	t.Cleanup(func() {
		if _, err := d.super.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	superURL = u.String()
	return withUser(t, superURL, d.name, d.password), superURL
}

// requireNoMembership fails if the DBA is left a member of one of
// pgconvo's roles: what it takes to check, it takes for the check only.
func (d *managedDBA) requireNoMembership(t *testing.T, after string) {
	t.Helper()
	var held string
	if err := d.super.QueryRow(`SELECT coalesce(string_agg(r, ', '), '') FROM unnest(ARRAY['convo_owner', 'convo_reader', 'convo_admin']) r
		WHERE pg_has_role($1, r, 'MEMBER')`, d.name).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != "" {
		t.Fatalf("after %s the DBA %s is a member of %s", after, d.name, held)
	}
}

// TestCLIManagedDBACycle: on a server where the migrating role is the DBA
// (LOGIN CREATEDB CREATEROLE, owner of the database it created, no
// superuser), the whole cycle works as that role through the CLI: up;
// verify (it may grant itself convo_reader for the check); a story as the
// application; down, whose data-loss check counts as convo_owner (the
// tables' owner, as the down migrations run) and so says what a superuser's
// check says: refused naming the tables, the version unchanged, when they
// hold rows, and not fooled by row-level security forced on a table; on a
// database holding no story, down -all and up again. The DBA is left a
// member of none of pgconvo's roles.
func TestCLIManagedDBACycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dba := newManagedDBA(t)
	latest := latestVersion(t)
	all := allMigrations(t)

	dbaURL, superURL := dba.createDB(t)
	cli := func(code int, want []string, args ...string) cliRun {
		t.Helper()
		return requireCLI(t, nil, code, want, append([]string{"-database", dbaURL}, args...)...)
	}
	cli(0, []string{fmt.Sprintf("version %d\n", latest)}, "up")
	dba.requireNoMembership(t, "up")
	cli(0, []string{"CHECK", "ownership", "privileges"}, "verify")
	dba.requireNoMembership(t, "verify")

	// The application's login, made by the DBA, writes a story.
	own := newPool(t, dbaURL, pgx.QueryExecModeDescribeExec)
	appName := "app_" + strings.ReplaceAll(newID()[:13], "-", "")
	appPassword := newID()
	mustExec(t, own, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE convo_app`, appName, appPassword))
	own.Close()
	app := newPool(t, withUser(t, dbaURL, appName, appPassword), pgx.QueryExecModeDescribeExec)
	var depth int
	if err := inOwnerTx(app, "alice", func(ctx context.Context, tx pgx.Tx) error {
		var conv string
		if err := tx.QueryRow(ctx, `SELECT convo.create_conversation('alice', 'You sell credits.')`).Scan(&conv); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "Buy me 500 credits"}]')`, conv); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT max(depth) FROM convo.path($1)`, conv).Scan(&depth)
	}); err != nil {
		t.Fatalf("the application's story: %v", err)
	}
	requireEqual(t, "the path's last depth", depth, 1)
	app.Close()

	// The superuser's check is the reference: the DBA's must say the same.
	superM := newMigrator(t, superURL)
	expect := func(to uint) *migrator.DataLossError {
		t.Helper()
		err := superM.CheckDataLoss(ctx, to)
		var loss *migrator.DataLossError
		if err != nil && !errors.As(err, &loss) {
			t.Fatalf("the superuser's check down to %d: %v", to, err)
		}
		return loss
	}
	refused := func(loss *migrator.DataLossError, args ...string) {
		t.Helper()
		r := cli(1, []string{strings.Join(args, " ") + " refused: " +
			fmt.Sprintf("going from version %d to %d would drop tables that hold rows", loss.From, loss.To),
			"nothing was changed", "-force-data-loss"}, args...)
		for _, tr := range loss.Tables {
			count := strings.TrimSuffix(strings.TrimPrefix(tr.String(), tr.Table+" ("), ")") // "2 rows"
			if !hasLine(r.stderr, append([]string{tr.Table}, strings.Fields(count)...)...) {
				t.Fatalf("%v: want %s in:\n%s", args, tr, r.stderr)
			}
		}
		if strings.Contains(r.stdout, "reverted") {
			t.Fatalf("%v refused yet reverted:\n%s", args, r.stdout)
		}
		cli(0, []string{fmt.Sprintf("version %d\n", loss.From)}, "version")
	}
	if loss := expect(latest - 1); loss != nil {
		refused(loss, "down", "1")
	} else {
		cli(0, []string{stepLines(all, "reverted", int(latest)) + fmt.Sprintf("version %d\n", latest-1)}, "down", "1")
		cli(0, []string{fmt.Sprintf("version %d\n", latest)}, "up")
	}
	loss := expect(0)
	if loss == nil {
		t.Fatal("the superuser's check finds no rows down to 0, after a story")
	}
	refused(loss, "down", "-all")
	dba.requireNoMembership(t, "down")

	// Row-level security forced on a table binds its owner too: counting as
	// convo_owner would then miss rows, so the check fails instead.
	superPool := newPool(t, superURL, pgx.QueryExecModeDescribeExec)
	mustExec(t, superPool, `ALTER TABLE convo.messages FORCE ROW LEVEL SECURITY`)
	r := cli(1, []string{"down -all refused: checking what migrating down", "row-level security",
		"nothing was changed"}, "down", "-all")
	if strings.Contains(r.stdout, "reverted") {
		t.Fatalf("down -all refused yet reverted:\n%s", r.stdout)
	}
	mustExec(t, superPool, `ALTER TABLE convo.messages NO FORCE ROW LEVEL SECURITY`)
	cli(0, []string{fmt.Sprintf("version %d\n", latest)}, "version")

	// A database with no story goes all the way down and up again.
	emptyURL, _ := dba.createDB(t)
	cli = func(code int, want []string, args ...string) cliRun {
		t.Helper()
		return requireCLI(t, nil, code, want, append([]string{"-database", emptyURL}, args...)...)
	}
	cli(0, []string{fmt.Sprintf("version %d\n", latest)}, "up")
	cli(0, []string{"0001 tree: reverted\nversion 0\n"}, "down", "-all")
	cli(0, []string{fmt.Sprintf("version %d\n", latest)}, "up")
	cli(0, []string{"CHECK", "ownership"}, "verify")
	dba.requireNoMembership(t, "down -all and up")
}
