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

// VerifyAccessError is a role that may not run convo.self_check(), nor
// become a member of convo_reader for verify's transaction.
type VerifyAccessError struct {
	Role string
	Err  error
}

// Error names who may verify and the grant that lets the role verify.
func (e *VerifyAccessError) Error() string {
	return fmt.Sprintf("role %s may not run convo.self_check(): it is granted to convo_reader (and so to convo_admin), "+
		"and %s is neither a member nor may grant itself convo_reader (CREATEROLE): verify as a member, "+
		"as the role that installed pgconvo or as a superuser, or have one of those run GRANT convo_reader TO %s",
		e.Role, e.Role, ident(e.Role))
}

// Unwrap returns PostgreSQL's error.
func (e *VerifyAccessError) Unwrap() error { return e.Err }

// Verify runs convo.self_check() on db and returns its rows, and an error
// naming the failing checks when any fails. It only reads. A role that may
// not run it but may grant itself convo_reader (CREATEROLE: the role that
// installed pgconvo, as every migration does with convo_owner) runs it as
// convo_reader, a member for that read-only transaction only. A database
// without the function is ErrNoSelfCheck; a role that may do neither, a
// *VerifyAccessError.
func Verify(ctx context.Context, db *sql.DB) ([]SelfCheck, error) {
	checks, err := selfCheck(ctx, db, false)
	if isInsufficientPrivilege(err) {
		var again error
		if checks, again = selfCheck(ctx, db, true); !errors.Is(again, errNotReader) {
			err = again
		}
	}
	var failed []string
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	if err == nil && len(failed) > 0 {
		return checks, fmt.Errorf("%d of %d checks failed: %v", len(failed), len(checks), failed)
	}
	return checks, err
}

// errNotReader is a role that may not act as convo_reader.
var errNotReader = errors.New("may not act as convo_reader")

// selfCheck reads convo.self_check() in a read-only transaction, as
// convo_reader when asReader (see actAs), and rolls back.
func selfCheck(ctx context.Context, db *sql.DB, asReader bool) ([]SelfCheck, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // Nothing to keep, a membership taken least of all.
	var role string
	if err := tx.QueryRowContext(ctx, `SELECT current_user::text`).Scan(&role); err != nil {
		return nil, err
	}
	if asReader {
		ok, err := actAs(ctx, tx, "convo_reader")
		if err != nil {
			return nil, fmt.Errorf("acting as convo_reader: %w", err)
		}
		if !ok {
			return nil, errNotReader
		}
	}
	if _, err := tx.ExecContext(ctx, `SET TRANSACTION READ ONLY`); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT check_name, ok, detail FROM convo.self_check()`)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch pgErr.Code {
			case "3F000", "42883": // no schema convo, no function
				return nil, fmt.Errorf("%w (%s)", ErrNoSelfCheck, pgErr.Message)
			case "42501":
				return nil, &VerifyAccessError{Role: role, Err: err}
			}
		}
		return nil, fmt.Errorf("running convo.self_check(): %w", err)
	}
	defer rows.Close()
	var checks []SelfCheck
	for rows.Next() {
		var c SelfCheck
		if err := rows.Scan(&c.Name, &c.OK, &c.Detail); err != nil {
			return nil, fmt.Errorf("reading convo.self_check(): %w", err)
		}
		checks = append(checks, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading convo.self_check(): %w", err)
	}
	return checks, nil
}
