package citus

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// The preamble and postamble of a migration as cmd/newmigration writes it
// (sql/migrations/0042_citus_ready.up.sql): no role switch, what it created handed
// over, the grants applied.
const (
	probePreamble = `DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
`
	probePostamble = `
SELECT convo_private.hand_over_objects();
SELECT convo_private.apply_grants();

DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
`
)

// withProbe is every migration of pgconvo's and a next one, written as
// cmd/newmigration writes them: a column added to a distributed table,
// convo.path re-created from its object file (a SECURITY DEFINER body,
// where distribute left a router), and a new private function.
func withProbe(t *testing.T) (fs.FS, uint) {
	t.Helper()
	latest, err := migrator.Latest()
	if err != nil {
		t.Fatal(err)
	}
	path, err := os.ReadFile("../../sql/tree/api/path.sql")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	names, err := fs.Glob(pgconvosql.Migrations, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		b, err := fs.ReadFile(pgconvosql.Migrations, name)
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = &fstest.MapFile{Data: b}
	}
	name := fmt.Sprintf("%04d_probe", latest+1)
	fsys[name+".up.sql"] = &fstest.MapFile{Data: []byte(probePreamble + `
ALTER TABLE convo.conversations ADD COLUMN probe_note text;

` + string(path) + `

CREATE FUNCTION convo_private.probe_private() RETURNS int
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS 'SELECT 43';
` + probePostamble)}
	fsys[name+".down.sql"] = &fstest.MapFile{Data: []byte(probePreamble + `
DROP FUNCTION convo_private.probe_private();
ALTER TABLE convo.conversations DROP COLUMN probe_note;
` + probePostamble)}
	return fsys, latest + 1
}

// TestLaterMigrationOnDistributedDatabase applies a migration after
// distribute: the API function it re-creates is routed again, with the new
// body on the nodes, and what was written before still reads through it;
// the column it adds reached every shard; its new function every worker.
func TestLaterMigrationOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	conv, first := treeStory(t, app, "alice")

	fsys, version := withProbe(t)
	db, err := sql.Open("pgx", n.url)
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrator.NewWith(db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	schemaChanges.Lock()
	err = m.Up(ctx)
	schemaChanges.Unlock()
	if err != nil {
		t.Fatalf("the later migration on the distributed database: %v", err)
	}
	h, err := migrator.ReadHistory(ctx, n.db)
	if err != nil || h.Version != version || h.Dirty {
		t.Fatalf("after the later migration: %+v, %v; want version %d, clean", h, err, version)
	}

	router := pgtest.QueryRow[bool](t, n.pool, `SELECT prosecdef FROM pg_proc WHERE oid = 'convo.path(uuid)'::regprocedure`)
	body := pgtest.QueryRow[bool](t, n.pool, `SELECT prosecdef FROM pg_proc WHERE oid = 'convo_node.path(uuid)'::regprocedure`)
	if router || !body {
		t.Errorf("convo.path runs as its definer: %v (want a router, false); its body convo_node.path: %v (want true)", router, body)
	}
	requireTreeStory(t, app, "alice", conv, first)

	pgtest.MustExec(t, n.pool, `UPDATE convo.conversations SET probe_note = 'seen' WHERE id = $1`, conv)
	if got := pgtest.QueryRow[int64](t, n.pool, `SELECT count(probe_note) FROM convo.conversations`); got != 1 {
		t.Errorf("probe_note set on %d conversations, want 1", got)
	}
	for _, u := range c.workerURLs(n) {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		var there bool
		err = conn.QueryRow(ctx, `SELECT to_regprocedure('convo_private.probe_private()') IS NOT NULL`).Scan(&there)
		conn.Close(ctx)
		if err != nil || !there {
			t.Errorf("convo_private.probe_private() on %s: %v, %v", u, there, err)
		}
	}
}
