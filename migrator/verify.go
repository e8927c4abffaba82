package migrator

import (
	"context"
	"database/sql"
	"fmt"
)

// SelfCheck is one row of convo.self_check(): an invariant of a live database
// and whether it holds, with the offenders in Detail when it does not.
type SelfCheck struct {
	Name   string
	OK     bool
	Detail string
}

// Verify runs convo.self_check() on db and returns its rows, and an error
// naming the failing checks when any fails. It only reads.
func Verify(ctx context.Context, db *sql.DB) ([]SelfCheck, error) {
	rows, err := db.QueryContext(ctx, `SELECT check_name, ok, detail FROM convo.self_check()`)
	if err != nil {
		return nil, fmt.Errorf("running convo.self_check() (is the database migrated to version 3 or later?): %w", err)
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
