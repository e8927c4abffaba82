package migrator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// SelfCheck is one row of convo.self_check(): an invariant of a live database
// and whether it holds, with the offenders in Detail when it does not.
type SelfCheck struct {
	Name   string
	OK     bool
	Detail string
}

// ErrNoSelfCheck is a database without convo.self_check(): not migrated to
// 0003_trust, which brings it.
var ErrNoSelfCheck = errors.New("this database has no convo.self_check(), which 0003_trust brings: migrate it up first")

// VerifyAccessError is a role that may not run convo.self_check().
type VerifyAccessError struct {
	Role string
	Err  error
}

// Error names the grant that lets the role verify.
func (e *VerifyAccessError) Error() string {
	return fmt.Sprintf("role %s may not run convo.self_check(): it is granted to convo_reader (and so to convo_admin, a member): "+
		"verify as a member of either or as a superuser, or have the DBA run GRANT convo_reader TO %s",
		e.Role, ident(e.Role))
}

// Unwrap returns PostgreSQL's error.
func (e *VerifyAccessError) Unwrap() error { return e.Err }

// Verify runs convo.self_check() on db and returns its rows, and an error
// naming the failing checks when any fails. It only reads. A database
// without the function is ErrNoSelfCheck; a role that may not run it, a
// *VerifyAccessError.
func Verify(ctx context.Context, db *sql.DB) ([]SelfCheck, error) {
	rows, err := db.QueryContext(ctx, `SELECT check_name, ok, detail FROM convo.self_check()`)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch pgErr.Code {
			case "3F000", "42883": // no schema convo, no function
				return nil, fmt.Errorf("%w (%s)", ErrNoSelfCheck, pgErr.Message)
			case "42501":
				var role string
				if db.QueryRowContext(ctx, `SELECT current_user::text`).Scan(&role) != nil {
					role = "(this role)"
				}
				return nil, &VerifyAccessError{Role: role, Err: err}
			}
		}
		return nil, fmt.Errorf("running convo.self_check(): %w", err)
	}
	defer rows.Close()
	var checks []SelfCheck
	var failed []string
	for rows.Next() {
		var c SelfCheck
		if err := rows.Scan(&c.Name, &c.OK, &c.Detail); err != nil {
			return nil, fmt.Errorf("reading convo.self_check(): %w", err)
		}
		checks = append(checks, c)
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading convo.self_check(): %w", err)
	}
	if len(failed) > 0 {
		return checks, fmt.Errorf("%d of %d checks failed: %v", len(failed), len(checks), failed)
	}
	return checks, nil
}
