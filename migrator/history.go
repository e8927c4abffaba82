package migrator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// historyTable is the table golang-migrate keeps the version in, in the
// first schema of the search path.
const historyTable = "schema_migrations"

// History is what the migration history table says, read without creating
// or changing anything.
type History struct {
	// Version is the current version, 0 when nothing is applied; Dirty,
	// whether that migration failed half way.
	Version uint
	Dirty   bool
	// Table is the history table, schema-qualified
	// (public.schema_migrations), whether or not it exists; Exists says
	// whether it does. A database never migrated has none: version 0.
	Table  string
	Exists bool
	// Schema is the schema the table is (or would be) in: the first schema
	// of the search path; empty when the search path names none that exists.
	Schema string
}

// HistoryAccessError is a role that may not read the history table.
type HistoryAccessError struct {
	// Role is the role that tried; Table the history table; Owner its
	// owner, the role that migrates.
	Role, Table, Owner string
	Err                error
}

// Error says who can read the table instead.
func (e *HistoryAccessError) Error() string {
	return fmt.Sprintf("role %s may not read %s, the migration history: run this as its owner %s (the role that migrates) "+
		"or a superuser, or have one of them run GRANT SELECT ON %s TO %s",
		e.Role, e.Table, e.Owner, e.Table, ident(e.Role))
}

// Unwrap returns PostgreSQL's error.
func (e *HistoryAccessError) Unwrap() error { return e.Err }

// ReadHistory reads the version from the history table when it exists, and
// says version 0 when it does not. Unlike Open, it never creates the table:
// status and version use it, and a role that may not create tables (the
// application's) can run them.
func ReadHistory(ctx context.Context, db *sql.DB) (*History, error) {
	h := &History{}
	var owner, role string
	err := db.QueryRowContext(ctx, `
		SELECT coalesce(current_schema()::text, ''), current_user::text, c.oid IS NOT NULL,
		       coalesce(pg_catalog.pg_get_userbyid(c.relowner)::text, '')
		  FROM (SELECT 1) one
		  LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = current_schema()
		  LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = $1`, historyTable).
		Scan(&h.Schema, &role, &h.Exists, &owner)
	if err != nil {
		return nil, fmt.Errorf("looking for the migration history table: %w", err)
	}
	h.Table = historyTable
	if h.Schema != "" {
		h.Table = ident(h.Schema) + "." + historyTable
	}
	if !h.Exists {
		return h, nil
	}
	var v int64
	err = db.QueryRowContext(ctx, `SELECT version, dirty FROM `+pgx.Identifier{h.Schema, historyTable}.Sanitize()+` LIMIT 1`).
		Scan(&v, &h.Dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return h, nil
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return nil, &HistoryAccessError{Role: role, Table: h.Table, Owner: owner, Err: err}
	case err != nil:
		return nil, fmt.Errorf("reading the schema version from %s: %w", h.Table, err)
	}
	if v > 0 { // golang-migrate writes -1, dirty, for "none applied" left half way.
		h.Version = uint(v)
	}
	return h, nil
}
