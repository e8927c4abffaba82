package migrator

import (
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// TestTopLevelStatements splits SQL the way CheckDataLoss reads the down
// migrations: a DROP TABLE inside a comment, a string or a function body is
// not a statement of the migration.
func TestTopLevelStatements(t *testing.T) {
	t.Parallel()
	sql := `-- DROP TABLE in_a_comment;
DROP TABLE convo.a; /* DROP TABLE /* nested */ in_a_block; */
CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $body$
BEGIN DROP TABLE in_a_body; END
$body$;
SELECT 'DROP TABLE in_a_string; it''s', E'\'; DROP TABLE in_an_escape', $1;
DO $$ BEGIN DROP TABLE in_a_do; END $$;
DROP TABLE IF EXISTS "odd;name", convo.b CASCADE`
	got := topLevelStatements(sql)
	want := []string{
		"DROP TABLE convo.a",
		"CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$",
		"SELECT '', E'', $1",
		"DO $$",
		`DROP TABLE IF EXISTS "odd;name", convo.b CASCADE`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("topLevelStatements:\n got %q\nwant %q", got, want)
	}
}

// TestDroppedBetween reads the tables each range of down migrations drops.
func TestDroppedBetween(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"0001_a.up.sql":   {Data: []byte("CREATE TABLE s.t (x int); INSERT INTO s.seed (x) VALUES (1);")},
		"0001_a.down.sql": {Data: []byte("drop table s.t;\nDROP SCHEMA s;")},
		"0002_b.up.sql":   {Data: []byte("CREATE SCHEMA p;")},
		"0002_b.down.sql": {Data: []byte("DROP TABLE IF EXISTS s.u, s.v RESTRICT; DROP SCHEMA p CASCADE;")},
	}
	for _, tc := range []struct {
		to, from        uint
		tables, schemas []string
	}{
		{0, 2, []string{"s.t", "s.u", "s.v"}, []string{"p"}},
		{1, 2, []string{"s.u", "s.v"}, []string{"p"}},
		{0, 1, []string{"s.t"}, nil},
		{2, 2, nil, nil},
	} {
		tables, schemas, err := droppedBetween(fsys, tc.to, tc.from)
		if err != nil {
			t.Fatal(err)
		}
		if !sameSet(tables, tc.tables) || !sameSet(schemas, tc.schemas) {
			t.Errorf("droppedBetween(%d, %d) = %q, %q; want %q, %q", tc.to, tc.from, tables, schemas, tc.tables, tc.schemas)
		}
	}
	seeded, err := seededTables(fsys)
	if err != nil || !sameSet(seeded, []string{"s.seed"}) {
		t.Fatalf("seededTables = %q, %v; want [s.seed]", seeded, err)
	}
}

// TestDroppedBetweenEmbedded pins what the real down migrations are read to
// drop, so that a migration whose drops the reader misses fails here: every
// table a migration creates is dropped by its down, and the state machine
// is the one table the migrations fill themselves.
func TestDroppedBetweenEmbedded(t *testing.T) {
	t.Parallel()
	all, err := List(pgconvosql.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	latest := all[len(all)-1].Version
	dropped, schemas, err := droppedBetween(pgconvosql.Migrations, 0, latest)
	if err != nil {
		t.Fatal(err)
	}
	files, err := parseFiles(pgconvosql.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.direction != "up" {
			continue
		}
		body, err := fs.ReadFile(pgconvosql.Migrations, f.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range topLevelStatements(string(body)) {
			fields := strings.Fields(stmt)
			if len(fields) < 3 || !strings.EqualFold(fields[0], "CREATE") || !strings.EqualFold(fields[1], "TABLE") {
				continue
			}
			table := strings.TrimSuffix(fields[2], "(")
			schema, _, _ := strings.Cut(table, ".")
			if !slices.Contains(dropped, table) && !slices.Contains(schemas, schema) {
				t.Errorf("%s creates table %s, and no down migration is read to drop it", f.file, table)
			}
		}
	}
	seeded, err := seededTables(pgconvosql.Migrations)
	// The state machine and the database's secret are seeded by the up
	// migrations themselves: their rows are the schema's, not data.
	if err != nil || !sameSet(seeded, []string{"convo.effect_transitions", "convo_private.digest_key"}) {
		t.Fatalf("seededTables = %q, %v; want [convo.effect_transitions convo_private.digest_key]", seeded, err)
	}
}

// TestDirtyErrorRepeatsDatabase: the recovery commands repeat -database
// when there is one, so that pasting them acts on the dirty database.
func TestDirtyErrorRepeatsDatabase(t *testing.T) {
	t.Parallel()
	plain := (&DirtyError{Version: 3}).Error()
	if !strings.Contains(plain, "`go run ./cmd/migrate force 2` (to retry 3)") {
		t.Fatalf("without a database: %s", plain)
	}
	withDB := (&DirtyError{Version: 3, DatabaseArg: `"$DATABASE_URL"`}).Error()
	for _, want := range []string{
		"`go run ./cmd/migrate -database \"$DATABASE_URL\" force 2` (to retry 3)",
		"`go run ./cmd/migrate -database \"$DATABASE_URL\" force 3` (if 3 did finish)",
	} {
		if !strings.Contains(withDB, want) {
			t.Fatalf("with a database: want %q in %s", want, withDB)
		}
	}
}

// TestTableRowsString spells the counts.
func TestTableRowsString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   TableRows
		want string
	}{
		{TableRows{"convo.tools", 1, false}, "convo.tools (1 row)"},
		{TableRows{"convo.tools", 2, false}, "convo.tools (2 rows)"},
		{TableRows{"convo.tools", countCap, true}, "convo.tools (at least 1000000 rows)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
