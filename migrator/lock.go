package migrator

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/golang-migrate/migrate/v4/database"
)

// HoldMigrationLock takes the advisory lock golang-migrate takes while it
// migrates this database (the same key: the database, the history table's
// schema and name), waiting while another session migrates, and returns
// what releases it. A command that reads the history before it migrates
// (to check privileges) holds it meanwhile, so that it never reads another
// command's migration half way (dirty) and mistakes it for a failed one.
func HoldMigrationLock(ctx context.Context, db *sql.DB) (release func(), err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var dbName, schema string
	if err := conn.QueryRowContext(ctx, `SELECT current_database(), coalesce(current_schema(), '')`).Scan(&dbName, &schema); err != nil {
		conn.Close()
		return nil, err
	}
	id, err := database.GenerateAdvisoryLockId(dbName, schema, historyTable)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, id); err != nil {
		conn.Close()
		return nil, fmt.Errorf("waiting for another migration of this database: %w", err)
	}
	return func() {
		conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, id)
		conn.Close()
	}, nil
}
