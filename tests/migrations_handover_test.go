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
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgconvo/pgconvo/migrator"
)

// The probe: object files and hand-written table changes of every kind a
// migration may create, for cmd/newmigration to write a migration from.
// One changed object (max_ref_length) is re-created over the owner's.
var handOverProbeFiles = map[string]string{
	"probe/api/handover_probe.sql": `-- handover_probe: a probe of the hand-over test.
CREATE OR REPLACE FUNCTION convo.handover_probe(p_n int)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN p_n + (SELECT count(*) FROM convo.handover_probe_rows)::int;
END;
$$;
`,
	"probe/private/handover_probe_length.sql": `-- handover_probe_length: a probe of the hand-over test.
CREATE OR REPLACE FUNCTION convo_private.handover_probe_length(p_word convo_private.handover_probe_word)
RETURNS int
LANGUAGE sql
IMMUTABLE
RETURN length(p_word);
`,
	"probe/private/handover_probe_touch.sql": `-- handover_probe_touch: a probe of the hand-over test.
CREATE OR REPLACE FUNCTION convo_private.handover_probe_touch()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN NEW;
END;
$$;
`,
	"probe/views/handover_probe_view.sql": `-- handover_probe_view: a probe of the hand-over test.
CREATE OR REPLACE VIEW convo.handover_probe_view AS
SELECT r.id, r.kind FROM convo.handover_probe_rows r;
`,
	"probe/triggers/handover_probe_trigger.sql": `-- handover_probe_trigger: a probe of the hand-over test.
CREATE OR REPLACE TRIGGER handover_probe_trigger
    BEFORE INSERT ON convo.handover_probe_rows
    FOR EACH ROW EXECUTE FUNCTION convo_private.handover_probe_touch();
`,
}

// handOverProbeUp are the probe's table changes; handOverProbeGone is a
// table there before the migration, which its up drops and its down
// creates again.
const (
	handOverProbeGone = `CREATE TABLE convo_private.handover_probe_gone (id int PRIMARY KEY);`
	handOverProbeUp   = `DROP TABLE convo_private.handover_probe_gone;
CREATE TYPE convo.handover_probe_kind AS ENUM ('ask', 'tell');
CREATE DOMAIN convo_private.handover_probe_word AS text CHECK (VALUE <> '');
CREATE TYPE convo_private.handover_probe_pair AS (a int, b int);
CREATE TABLE convo.handover_probe_rows (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    n    serial,
    kind convo.handover_probe_kind,
    word convo_private.handover_probe_word);
CREATE TABLE convo_private.handover_probe_parts (id int) PARTITION BY RANGE (id);
CREATE TABLE convo_private.handover_probe_parts_1 PARTITION OF convo_private.handover_probe_parts FOR VALUES FROM (0) TO (10);
CREATE SEQUENCE convo_private.handover_probe_seq;
CREATE MATERIALIZED VIEW convo_private.handover_probe_mv AS SELECT 1 AS one;
CREATE PROCEDURE convo_private.handover_probe_proc() LANGUAGE sql BEGIN ATOMIC SELECT 1; END;
CREATE AGGREGATE convo_private.handover_probe_sum(int) (sfunc = int4pl, stype = int);
CREATE OPERATOR convo_private.### (leftarg = int, rightarg = int, function = int4eq);
CREATE COLLATION convo_private.handover_probe_c (locale = 'C');
CREATE TEXT SEARCH CONFIGURATION convo_private.handover_probe_ts (COPY = simple);
CREATE STATISTICS convo.handover_probe_stats ON id, n FROM convo.handover_probe_rows;
`
	handOverProbeDown = `DROP STATISTICS convo.handover_probe_stats;
DROP TEXT SEARCH CONFIGURATION convo_private.handover_probe_ts;
DROP COLLATION convo_private.handover_probe_c;
DROP OPERATOR convo_private.### (int, int);
DROP AGGREGATE convo_private.handover_probe_sum(int);
DROP PROCEDURE convo_private.handover_probe_proc();
DROP MATERIALIZED VIEW convo_private.handover_probe_mv;
DROP SEQUENCE convo_private.handover_probe_seq;
DROP TABLE convo_private.handover_probe_parts;
DROP TABLE convo.handover_probe_rows;
DROP TYPE convo_private.handover_probe_pair;
DROP DOMAIN convo_private.handover_probe_word;
DROP TYPE convo.handover_probe_kind;
` + handOverProbeGone + "\n"
)

// generateHandOverProbe runs cmd/newmigration on a copy of sql/ holding
// the probe's object files (and max_ref_length changed), and returns the
// up and down migration it wrote, the probe's table changes put where the
// generator marks their places.
func generateHandOverProbe(t *testing.T) (up, down string) {
	t.Helper()
	dir := t.TempDir()
	sqlDir := filepath.Join(dir, "sql")
	if err := os.CopyFS(sqlDir, os.DirFS("../sql")); err != nil {
		t.Fatal(err)
	}
	for name, text := range handOverProbeFiles {
		path := filepath.Join(sqlDir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changed := filepath.Join(sqlDir, "operations", "api", "max_ref_length.sql")
	body, err := os.ReadFile(changed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "RETURN 1024;") {
		t.Fatalf("%s no longer returns 1024: change the probe", changed)
	}
	if err := os.WriteFile(changed, []byte(strings.Replace(string(body), "RETURN 1024;", "RETURN 1024 + 0;", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "newmigration")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/newmigration").CombinedOutput(); err != nil {
		t.Fatalf("building cmd/newmigration: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "handover_probe")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cmd/newmigration: %v\n%s", err, out)
	}
	name := fmt.Sprintf("%04d_handover_probe", latestVersion(t)+1)
	read := func(suffix, marker, changes string) string {
		t.Helper()
		body, err := os.ReadFile(filepath.Join(sqlDir, "migrations", name+suffix))
		if err != nil {
			t.Fatal(err)
		}
		text := string(body)
		if strings.Count(text, marker) != 1 {
			t.Fatalf("%s%s has no one place %q:\n%s", name, suffix, marker, text)
		}
		for _, asOwner := range []string{"set_config('role'", "SET ROLE", "SET LOCAL ROLE"} {
			if strings.Contains(text, asOwner) {
				t.Fatalf("%s%s switches role (%s):\n%s", name, suffix, asOwner, text)
			}
		}
		return strings.Replace(text, marker, marker+changes+"\n", 1)
	}
	return read(".up.sql", "-- Table changes, written by hand, go here, above the objects that use them.\n\n", handOverProbeUp),
		read(".down.sql", "-- Reverse the table changes here, below the objects.\n\n", handOverProbeDown)
}

// asOwnerRole returns text wrapped the way every migration up to 0041 ran
// its statements: as convo_owner, a member of which the migrating role
// becomes for the transaction if it is not one (0041's own preamble and
// postamble, under a setting of their own so that text's do not see it).
func asOwnerRole(t *testing.T, text string) string {
	t.Helper()
	body, err := os.ReadFile("../sql/migrations/0041_import_merge.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	old := string(body)
	const preStart, preEnd = "-- Act as the owner role", "SELECT set_config('role', 'convo_owner', true);\n"
	const postStart = "-- Back to the migrating role"
	i, j, k := strings.Index(old, preStart), strings.Index(old, preEnd), strings.Index(old, postStart)
	if i < 0 || j < i || k < j {
		t.Fatal("0041_import_merge.up.sql has no owner preamble and postamble to wrap with")
	}
	own := func(s string) string {
		return strings.ReplaceAll(s, "pgconvo.revoke_owner_after_migration", "pgconvo.revoke_owner_after_old_way")
	}
	return own(old[i:j+len(preEnd)]) + "\n" + text + "\n" + own(old[k:])
}

// applyText runs a migration's text in one transaction, as psql -1 -f would.
func applyText(ctx context.Context, pool *pgxpool.Pool, text string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, text, pgx.QueryExecModeSimpleProtocol); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// handOverSnapshot is snapshotPackage (owners and privileges included) with
// the default privileges of every role and the database's own.
func handOverSnapshot(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	snap := snapshotPackage(t, db)
	for _, row := range queryRowsAs[string](t, pool, `
		SELECT 'default privileges of ' || pg_get_userbyid(defaclrole) || ' in ' ||
		       coalesce(nullif(defaclnamespace, 0)::regnamespace::text, 'every schema') || ' on ' || defaclobjtype::text || ': ' || defaclacl::text
		  FROM pg_default_acl
		UNION ALL
		SELECT 'database privileges: ' || coalesce(datacl::text, 'default') FROM pg_database WHERE datname = current_database()`) {
		snap[row] = ""
	}
	return snap
}

// requireHandOverMatchesOwner applies the probe migration, up then down,
// on copies of one database at the latest version: the old way, as
// convo_owner, and the new way, as the connected role, which hands what it
// creates over. The catalogs must come out the same, after up and after
// down (where the down's hand-written part creates a table again); and
// they must not when the hand-over is left out, or this proves nothing.
// dbs returns a fresh pool on a new copy each call.
func requireHandOverMatchesOwner(t *testing.T, dbs func() *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	up, down := generateHandOverProbe(t)
	const handOverCall = "SELECT convo_private.hand_over_objects();\n"
	if !strings.Contains(up, handOverCall) || !strings.Contains(down, handOverCall) {
		t.Fatalf("the generated migration does not hand over:\n%s\n-- down:\n%s", up, down)
	}
	oldWay, newWay, skipped := dbs(), dbs(), dbs()
	for _, pool := range []*pgxpool.Pool{oldWay, newWay, skipped} {
		if err := applyText(ctx, pool, asOwnerRole(t, handOverProbeGone)); err != nil {
			t.Fatalf("creating the table the probe drops: %v", err)
		}
	}
	start := handOverSnapshot(t, newWay)

	step := func(what string, pool *pgxpool.Pool, text string) map[string]string {
		t.Helper()
		if err := applyText(ctx, pool, text); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return handOverSnapshot(t, pool)
	}
	oldUp := step("up the old way, as convo_owner", oldWay, asOwnerRole(t, up))
	newUp := step("up the new way, handing over", newWay, up)
	if diff := diffSnapshots(oldUp, newUp); diff != "" {
		t.Fatalf("created as convo_owner, and created by the migrating role then handed over, differ:\n%s", diff)
	}
	if diffSnapshots(start, newUp) == "" {
		t.Fatal("the probe migration changed nothing")
	}

	oldDown := step("down the old way", oldWay, asOwnerRole(t, down))
	newDown := step("down the new way", newWay, down)
	if diff := diffSnapshots(oldDown, newDown); diff != "" {
		t.Fatalf("going down as convo_owner, and as the migrating role handing over, differ:\n%s", diff)
	}
	if diff := diffSnapshots(start, newDown); diff != "" {
		t.Fatalf("up then down the new way differs from before:\n%s", diff)
	}

	// Without the hand-over the up fails (apply_grants takes the probe's
	// procedure, executable by PUBLIC, for a function); without it and the
	// procedure, the comparison fails, naming the owners.
	migrating := queryRow[string](t, skipped, `SELECT current_user::text`)
	bare := strings.Replace(up, handOverCall, "", 1)
	requireSQLState(t, applyText(ctx, skipped, bare), "42809")
	const proc = "CREATE PROCEDURE convo_private.handover_probe_proc() LANGUAGE sql BEGIN ATOMIC SELECT 1; END;\n"
	if err := applyText(ctx, skipped, strings.Replace(bare, proc, "", 1)); err != nil {
		t.Fatalf("up without the hand-over: %v", err)
	}
	diff := diffSnapshots(oldUp, handOverSnapshot(t, skipped))
	for _, want := range []string{"~ convo: relation handover_probe_rows changed", "owner=convo_owner", "owner=" + migrating} {
		if !strings.Contains(diff, want) {
			t.Fatalf("without the hand-over the catalog should differ in owners (%q), got:\n%s", want, diff)
		}
	}
}

// TestMigrationHandOverMatchesOwnerAsSuperuser: a migration as
// cmd/newmigration writes it, applied by a superuser, leaves the catalog
// (owners, privileges, default privileges) as creating everything as
// convo_owner did.
func TestMigrationHandOverMatchesOwnerAsSuperuser(t *testing.T) {
	t.Parallel()
	requireHandOverMatchesOwner(t, func() *pgxpool.Pool {
		pool := newDB(t)
		return newPool(t, pool.Config().ConnString(), pgx.QueryExecModeDescribeExec)
	})
}

// TestMigrationHandOverMatchesOwnerAsManagedDBA: the same, applied by a
// managed server's DBA (LOGIN CREATEDB CREATEROLE, no superuser), who
// migrated the database and becomes a member of convo_owner only for each
// migration; it is left a member of nothing.
func TestMigrationHandOverMatchesOwnerAsManagedDBA(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dba := newManagedDBA(t)
	dbaURL, _ := dba.createDB(t)
	m, err := migrator.Open(dbaURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatalf("migrating as the DBA: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbaURL)
	if err != nil {
		t.Fatal(err)
	}
	template := strings.TrimPrefix(u.Path, "/")
	maintenance := newPool(t, withUser(t, adminURL(), dba.name, dba.password), pgx.QueryExecModeDescribeExec)
	copies := 0
	requireHandOverMatchesOwner(t, func() *pgxpool.Pool {
		copies++
		name := fmt.Sprintf("%s_copy%d", template, copies)
		mustExec(t, maintenance, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, template))
		t.Cleanup(func() {
			if _, err := dba.super.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`); err != nil {
				t.Errorf("dropping database %s: %v", name, err)
			}
		})
		u.Path = "/" + name
		return newPool(t, u.String(), pgx.QueryExecModeDescribeExec)
	})
	dba.requireNoMembership(t, "the probe migrations")
}
