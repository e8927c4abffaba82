// Package migrator applies pgconvo's embedded SQL migrations with
// golang-migrate, over the pgx driver. It knows migrations and nothing else:
// the schema itself lives in the SQL.
package migrator

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // Registers the "pgx" database/sql driver.

	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// Migrator runs the embedded migrations against one database. golang-migrate
// holds a PostgreSQL advisory lock while it changes the schema, so two
// migrators on the same database take turns.
type Migrator struct {
	// DatabaseArg, when not empty, is the -database argument that the
	// recovery commands of a DirtyError repeat, spelled for the shell
	// (`'postgres://...'` or `"$DATABASE_URL"`), so that pasting one acts
	// on the database that is dirty and no other.
	DatabaseArg string

	m      *migrate.Migrate
	db     *sql.DB
	drv    *reportingDriver
	all    []Migration
	onStep func(Step)
}

// Step is one migration that a Migrator applied or reverted.
type Step struct {
	// Version and Name name the migration.
	Version uint
	Name    string
	// Up is true when the migration was applied, false when reverted.
	Up bool
}

// String reads "0003 trust: applied" or "0003 trust: reverted".
func (s Step) String() string {
	what := "applied"
	if !s.Up {
		what = "reverted"
	}
	return fmt.Sprintf("%04d %s: %s", s.Version, s.Name, what)
}

// Open connects to the database at url (postgres:// or postgresql://) and
// returns a Migrator that owns the connection. Call Close when done.
func Open(url string) (*Migrator, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	m, err := New(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return m, nil
}

// New returns a Migrator over db. The Migrator takes db over: Close closes
// it, because golang-migrate's driver closes the pool it was given.
func New(db *sql.DB) (*Migrator, error) {
	return NewWith(db, pgconvosql.Migrations)
}

// NewWith is New over another set of migrations, at the root of
// migrations: the tests' way to run a migration that is not pgconvo's yet.
func NewWith(db *sql.DB, migrations fs.FS) (*Migrator, error) {
	all, err := List(migrations)
	if err != nil {
		return nil, err
	}
	src, err := iofs.New(migrations, ".")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	drv, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("preparing the migrations table: %w", err)
	}
	g := &Migrator{db: db, all: all}
	g.drv = &reportingDriver{Driver: drv, report: g.report}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", g.drv)
	if err != nil {
		src.Close()
		drv.Close()
		return nil, fmt.Errorf("setting up golang-migrate: %w", err)
	}
	g.m = m
	return g, nil
}

// OnStep has fn called after each migration that Up, Down or Goto applies
// or reverts, as it finishes, so that a caller can say what was done even
// when a later migration fails.
func (g *Migrator) OnStep(fn func(Step)) {
	g.onStep = fn
}

// report turns a finished migration, from version from to version to
// (database.NilVersion for none), into a Step for the OnStep callback.
func (g *Migrator) report(from, to int) {
	if g.onStep == nil {
		return
	}
	s := Step{Version: uint(to), Up: to > from}
	if !s.Up {
		s.Version = uint(from)
	}
	if s.Version >= 1 && int(s.Version) <= len(g.all) {
		s.Name = g.all[s.Version-1].Name
	}
	g.onStep(s)
}

// reportingDriver is the pgx driver with a look at what golang-migrate
// does: it marks the version dirty before each migration and clean after
// it, so a clean version following a dirty one is a migration that finished.
// Force sets a clean version alone and reports nothing.
type reportingDriver struct {
	database.Driver
	report  func(from, to int)
	from    int
	running bool
	// distributed runs each migration as a distributed database needs it
	// (runDistributed).
	distributed bool
}

// Run applies one migration; on a distributed database, through
// runDistributed.
func (d *reportingDriver) Run(migration io.Reader) error {
	if !d.distributed {
		return d.Driver.Run(migration)
	}
	return d.runDistributed(migration)
}

// runDistributed applies a migration to a distributed database: in one
// transaction, one statement at a time (Citus refuses several commands in
// one string where it propagates them), with the shards changed one
// connection at a time and the guards allowed on distributed tables
// (prepareDistributedTx), and the API routed again at the end, since the
// migration may have re-created an API function as its body (route_api).
// It creates objects as the migrating role, which is what makes Citus open
// its connections to the workers as a role that can log in.
func (d *reportingDriver) runDistributed(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	stmts := append([]string{"BEGIN",
		"SET LOCAL citus.multi_shard_modify_mode = 'sequential'",
		"SET LOCAL citus.enable_unsafe_triggers = on"},
		statementsOf(string(body))...)
	stmts = append(stmts, "SELECT convo_node.route_api()", "SELECT convo_private.apply_grants()", "COMMIT")
	for _, s := range stmts {
		if err := d.Driver.Run(strings.NewReader(s)); err != nil {
			d.Driver.Run(strings.NewReader("ROLLBACK")) //nolint:errcheck // The migration's error is the one to report.
			return err
		}
	}
	return nil
}

// SetVersion records version as golang-migrate asks, and reports a
// migration that has just finished.
func (d *reportingDriver) SetVersion(version int, dirty bool) error {
	if dirty {
		from, _, err := d.Driver.Version()
		if err != nil {
			return err
		}
		d.from, d.running = from, true
	}
	if err := d.Driver.SetVersion(version, dirty); err != nil {
		return err
	}
	if !dirty && d.running {
		d.running = false
		d.report(d.from, version)
	}
	return nil
}

// Close releases the Migrator's connection and closes its database pool.
func (g *Migrator) Close() error {
	srcErr, dbErr := g.m.Close()
	if err := errors.Join(srcErr, dbErr); err != nil {
		return fmt.Errorf("closing migrator: %w", err)
	}
	return nil
}

// Up applies every pending migration. Having nothing to do is success.
func (g *Migrator) Up(ctx context.Context) error {
	return g.run(ctx, "migrating up", g.m.Up)
}

// Down reverts n migrations, or every applied migration when n is 0.
// Having nothing to do is success.
// More steps than there are applied migrations is refused before anything
// is reverted. Down drops what the down migrations drop, rows and all: see
// CheckDataLoss for asking first.
func (g *Migrator) Down(ctx context.Context, n int) error {
	if n < 0 {
		return fmt.Errorf("migrating down: step count %d is negative", n)
	}
	if n == 0 {
		return g.run(ctx, "migrating all the way down", g.m.Down)
	}
	what := fmt.Sprintf("migrating down %d step(s)", n)
	if v, dirty, err := g.Version(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if !dirty && uint(n) > v {
		return fmt.Errorf("%s: only %d migration(s) are applied; nothing was reverted", what, v)
	}
	return g.run(ctx, what, func() error { return g.m.Steps(-n) })
}

// Goto migrates up or down to version v, which must be 0 (nothing
// applied, the same as Down(ctx, 0)) or one of the embedded migrations.
func (g *Migrator) Goto(ctx context.Context, v uint) error {
	if v == 0 {
		return g.Down(ctx, 0)
	}
	if err := g.known(int(v)); err != nil {
		return fmt.Errorf("migrating to version %d: %w", v, err)
	}
	return g.run(ctx, fmt.Sprintf("migrating to version %d", v), func() error { return g.m.Migrate(v) })
}

// known fails unless v is the version of an embedded migration.
func (g *Migrator) known(v int) error {
	if v < 1 || v > len(g.all) {
		return fmt.Errorf("there is no migration %d: the migrations are 1 (%s) to %d (%s)",
			v, g.all[0].Name, len(g.all), g.all[len(g.all)-1].Name)
	}
	return nil
}

// Version returns the database's current version, 0 when no migration has
// been applied, and whether the last migration failed half way.
func (g *Migrator) Version(ctx context.Context) (v uint, dirty bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	v, dirty, err = g.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the schema version: %w", err)
	}
	return v, dirty, nil
}

// Force records version v as applied and clean without running anything;
// 0 (or -1, golang-migrate's spelling) records that nothing is applied, and
// any other v must be an embedded migration. Use it to recover from a dirty
// database after repairing the schema by hand.
func (g *Migrator) Force(ctx context.Context, v int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if v == 0 {
		v = database.NilVersion // golang-migrate has no version 0; -1 means "none applied".
	}
	if v != database.NilVersion {
		if err := g.known(v); err != nil {
			return fmt.Errorf("forcing version %d: %w; nothing was recorded", v, err)
		}
	}
	if err := g.m.Force(v); err != nil {
		return fmt.Errorf("forcing version %d: %w", v, err)
	}
	return nil
}

// Status lists every embedded migration in version order and marks those
// the database has applied.
func (g *Migrator) Status(ctx context.Context) ([]Migration, error) {
	all := append([]Migration(nil), g.all...)
	v, dirty, err := g.Version(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i].Applied = all[i].Version <= v
		all[i].Dirty = dirty && all[i].Version == v
	}
	return all, nil
}

// Latest returns the highest embedded migration version.
func Latest() (uint, error) {
	all, err := List(pgconvosql.Migrations)
	if err != nil {
		return 0, err
	}
	return all[len(all)-1].Version, nil
}

// Hash returns a sha256 over the name and content of every embedded SQL
// file, in name order. It changes whenever any migration changes, which is
// what pgtestdb needs to know when to rebuild its template database.
func Hash() string {
	h := sha256.New()
	names, err := fs.Glob(pgconvosql.Migrations, "*.sql")
	if err != nil {
		panic(fmt.Sprintf("globbing embedded migrations: %v", err)) // Only a bad pattern fails.
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := fs.ReadFile(pgconvosql.Migrations, name)
		if err != nil {
			panic(fmt.Sprintf("reading embedded %s: %v", name, err)) // Embedded files always read.
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DirtyError reports a database whose last migration failed half way.
type DirtyError struct {
	// Version is the migration that did not finish.
	Version uint
	// DatabaseArg is the -database argument the recovery commands repeat
	// (see Migrator.DatabaseArg); empty for none.
	DatabaseArg string
}

// Error says what happened and how to recover.
func (e *DirtyError) Error() string {
	cmd := "go run ./cmd/migrate"
	if e.DatabaseArg != "" {
		cmd += " -database " + e.DatabaseArg
	}
	return fmt.Sprintf("database is dirty at version %d (a migration failed half way): "+
		"repair the schema by hand, then run `%s force %d` (to retry %d) "+
		"or `%s force %d` (if %d did finish)",
		e.Version, cmd, e.Version-1, e.Version, cmd, e.Version, e.Version)
}

// run calls fn, which is a golang-migrate operation, and turns its errors
// into ours. golang-migrate takes no context, so a cancelled ctx asks it to
// stop after the migration in progress.
func (g *Migrator) run(ctx context.Context, what string, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	g.drv.running = false
	restore, err := g.prepareForCitus(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer restore()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			select {
			case g.m.GracefulStop <- true: // Read by golang-migrate between migrations.
			default: // A stop is already pending.
			}
		case <-done:
		}
	}()
	err = fn()
	close(done)
	<-stopped
	select {
	case <-g.m.GracefulStop: // Drop a stop request that arrived too late to matter.
	default:
	}
	if err == nil || errors.Is(err, migrate.ErrNoChange) {
		if ctx.Err() != nil { // golang-migrate stops early without an error.
			return fmt.Errorf("%s: stopped, perhaps before the end: %w", what, ctx.Err())
		}
		return nil
	}
	var dirty migrate.ErrDirty
	if errors.As(err, &dirty) {
		return fmt.Errorf("%s: %w", what, &DirtyError{Version: uint(dirty.Version), DatabaseArg: g.DatabaseArg})
	}
	err = withPostgresError(err)
	// A migration that failed part way leaves the database dirty: say so,
	// with the way out, next to the SQL error.
	if v, isDirty, verr := g.m.Version(); verr == nil && isDirty {
		return fmt.Errorf("%s: %w\n%w", what, err, &DirtyError{Version: v, DatabaseArg: g.DatabaseArg})
	}
	return fmt.Errorf("%s: %w", what, err)
}

// withPostgresError rewrites a failed migration's error, which
// golang-migrate wraps (without Unwrap) around the whole migration's text,
// as PostgreSQL's error with its line, DETAIL and HINT: the hint often says
// what to do (for example, which role to grant).
func withPostgresError(err error) error {
	var dbErr database.Error
	var pgErr *pgconn.PgError
	if !errors.As(err, &dbErr) || !errors.As(dbErr.OrigErr, &pgErr) {
		return err
	}
	out := fmt.Errorf("%s at line %d: %w", dbErr.Err, dbErr.Line, pgErr)
	if pgErr.Detail != "" {
		out = fmt.Errorf("%w\ndetail: %s", out, pgErr.Detail)
	}
	if pgErr.Hint != "" {
		out = fmt.Errorf("%w\nhint: %s", out, pgErr.Hint)
	}
	return out
}
