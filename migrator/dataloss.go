package migrator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// TableRows is a table that holds rows, with how many.
type TableRows struct {
	// Table is the table's name as PostgreSQL prints it (convo.messages).
	Table string
	// Rows is the number of rows, counted up to countCap.
	Rows int64
	// AtLeast reports that counting stopped at Rows.
	AtLeast bool
}

// String reads "convo.messages (12 rows)".
func (t TableRows) String() string {
	more := ""
	if t.AtLeast {
		more = "at least "
	}
	noun := "rows"
	if t.Rows == 1 && !t.AtLeast {
		noun = "row"
	}
	return fmt.Sprintf("%s (%s%d %s)", t.Table, more, t.Rows, noun)
}

// countCap bounds each count, so that checking a large ledger stays quick.
const countCap = 1_000_000

// DataLossError says that migrating down would drop tables that hold rows.
type DataLossError struct {
	// From and To are the versions the migration would go between.
	From, To uint
	// Tables are the tables that hold rows, by name.
	Tables []TableRows
}

// Error names the tables and their row counts.
func (e *DataLossError) Error() string {
	names := make([]string, len(e.Tables))
	for i, t := range e.Tables {
		names[i] = t.String()
	}
	return fmt.Sprintf("migrating down from version %d to %d would drop tables that hold rows: %s",
		e.From, e.To, strings.Join(names, ", "))
}

var (
	// dropTableRe matches a top-level DROP TABLE and captures its names.
	dropTableRe = regexp.MustCompile(`(?is)^DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(.+?)(?:\s+(?:CASCADE|RESTRICT))?$`)
	// dropSchemaCascadeRe matches DROP SCHEMA ... CASCADE, which drops every
	// table in the schemas it names.
	dropSchemaCascadeRe = regexp.MustCompile(`(?is)^DROP\s+SCHEMA\s+(?:IF\s+EXISTS\s+)?(.+?)\s+CASCADE$`)
	// insertRe matches a top-level INSERT and captures its table.
	insertRe = regexp.MustCompile(`(?is)^INSERT\s+INTO\s+([^\s(]+)`)
	// movesRe matches an INSERT that reads pgconvo's tables: rows a user
	// stored, moved by a migration, not the schema's own.
	movesRe = regexp.MustCompile(`(?is)\bFROM\s+convo(_private)?\.`)
)

// CheckDataLoss asks the database what migrating down from its current
// version to version to would drop, and returns a *DataLossError naming
// the tables that hold rows. It reads the embedded down migrations of the
// versions that would be reverted for their top-level DROP TABLE and DROP
// SCHEMA ... CASCADE statements, and counts the rows of those tables that
// exist. Rows that the up migrations insert themselves (a top-level INSERT,
// like the effect state machine) are the schema's, not data, so a database
// holding only those passes. It returns nil when nothing would be lost, when
// to is not below the current version, or when the database is dirty (the
// migration itself then refuses). A row count it may not read (no
// privilege, or row-level security would hide rows) is an error: it cannot
// say that nothing would be lost.
//
// The check reads and writes nothing else, and does not hold golang-migrate's
// lock: rows written between the check and the migration are not seen.
func (g *Migrator) CheckDataLoss(ctx context.Context, to uint) error {
	from, dirty, err := g.Version(ctx)
	if err != nil || dirty || to >= from {
		return err
	}
	dropped, schemas, err := droppedBetween(pgconvosql.Migrations, to, from)
	if err != nil {
		return err
	}
	seeded, err := seededTables(pgconvosql.Migrations)
	if err != nil {
		return err
	}
	tables, err := countDropped(ctx, g.db, dropped, schemas, seeded)
	if err != nil {
		return fmt.Errorf("checking what migrating down from version %d to %d would drop: %w", from, to, err)
	}
	if len(tables) > 0 {
		return &DataLossError{From: from, To: to, Tables: tables}
	}
	return nil
}

// droppedBetween returns the tables and the schemas (dropped with CASCADE)
// that the down migrations of versions to+1 through from drop, as written.
func droppedBetween(fsys fs.FS, to, from uint) (tables, schemas []string, err error) {
	files, err := parseFiles(fsys)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		if f.direction != "down" || f.version <= to || f.version > from {
			continue
		}
		body, err := fs.ReadFile(fsys, f.file)
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", f.file, err)
		}
		for _, stmt := range topLevelStatements(string(body)) {
			if m := dropTableRe.FindStringSubmatch(stmt); m != nil {
				tables = append(tables, splitNames(m[1])...)
			} else if m := dropSchemaCascadeRe.FindStringSubmatch(stmt); m != nil {
				schemas = append(schemas, splitNames(m[1])...)
			}
		}
	}
	return tables, schemas, nil
}

// seededTables returns the tables that the up migrations insert rows into
// at the top level (reference data, not a function body's INSERT, nor an
// INSERT that moves rows a user stored from another of pgconvo's tables).
func seededTables(fsys fs.FS) ([]string, error) {
	files, err := parseFiles(fsys)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if f.direction != "up" {
			continue
		}
		body, err := fs.ReadFile(fsys, f.file)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f.file, err)
		}
		for _, stmt := range topLevelStatements(string(body)) {
			if m := insertRe.FindStringSubmatch(stmt); m != nil && !movesRe.MatchString(stmt) {
				out = append(out, m[1])
			}
		}
	}
	return out, nil
}

// splitNames splits "a.b, c" into its names. Names are kept as written,
// quotes included, for to_regclass and to_regnamespace to resolve.
func splitNames(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// countDropped counts the rows of the named tables and of every table in
// the named schemas, leaving out tables that do not exist, seeded tables
// and empty ones. It counts as the role the down migrations drop them as:
// once pgconvo is installed (convo_owner owns schema convo), a role that is
// no superuser acts as convo_owner, the tables' owner, as the migrations do
// (see actAs), and as itself when it may not. It counts read-only with
// row_security off, so that row-level security makes the count fail
// instead of hiding rows, and rolls back (a membership taken included).
func countDropped(ctx context.Context, db *sql.DB, tables, schemas, seeded []string) (_ []TableRows, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // Nothing to keep, a membership taken least of all.
	var role string
	var asOwner bool
	if err := tx.QueryRowContext(ctx, `
		SELECT r.rolname::text, NOT r.rolsuper AND EXISTS (SELECT 1 FROM pg_namespace n
		                                   WHERE n.nspname = 'convo' AND pg_get_userbyid(n.nspowner) = 'convo_owner')
		  FROM pg_roles r WHERE r.rolname = current_user`).Scan(&role, &asOwner); err != nil {
		return nil, err
	}
	if asOwner {
		ok, actErr := actAs(ctx, tx, "convo_owner")
		if actErr != nil {
			return nil, fmt.Errorf("acting as convo_owner: %w", actErr)
		}
		if !ok {
			defer func() {
				if isInsufficientPrivilege(err) {
					err = fmt.Errorf("%w (the check counts as convo_owner, the tables' owner, which role %s may not act as: "+
						"go down as the role that installed pgconvo or a superuser, or have one of those run "+
						"GRANT convo_owner TO %s, and REVOKE it after)", err, role, ident(role))
				}
			}()
		}
	}
	for _, set := range []string{`SET TRANSACTION READ ONLY`, `SET LOCAL row_security = off`} {
		if _, err := tx.ExecContext(ctx, set); err != nil {
			return nil, err
		}
	}
	// The tables that exist, as PostgreSQL names them, less the seeded ones
	// and the derived ones (a COMMENT beginning "Derived": convo.live_path,
	// which the tree and the head log rebuild).
	rows, err := tx.QueryContext(ctx, `
		SELECT DISTINCT c.oid::regclass::text
		  FROM pg_class c
		 WHERE c.relkind IN ('r', 'p')
		   AND (c.oid IN (SELECT to_regclass(t) FROM unnest($1::text[]) t)
		        OR c.relnamespace IN (SELECT to_regnamespace(s) FROM unnest($2::text[]) s))
		   AND c.oid NOT IN (SELECT to_regclass(t) FROM unnest($3::text[]) t WHERE to_regclass(t) IS NOT NULL)
		   AND coalesce(obj_description(c.oid, 'pg_class'), '') NOT LIKE 'Derived%'
		 ORDER BY 1`, pgTextArray(tables), pgTextArray(schemas), pgTextArray(seeded))
	if err != nil {
		return nil, fmt.Errorf("looking up the tables: %w", err)
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, name)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("looking up the tables: %w", err)
	}
	var out []TableRows
	for _, name := range names {
		var n int64
		// name is PostgreSQL's own quoting of a regclass, safe to splice.
		q := fmt.Sprintf(`SELECT count(*) FROM (SELECT FROM %s LIMIT %d) t`, name, countCap)
		if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("counting the rows of %s: %w", name, err)
		}
		if n > 0 {
			out = append(out, TableRows{Table: name, Rows: n, AtLeast: n == countCap})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out, nil
}

// pgTextArray spells names as a PostgreSQL text[] literal.
func pgTextArray(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(n) + `"`
	}
	return "{" + strings.Join(quoted, ",") + "}"
}
