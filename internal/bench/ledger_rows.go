package bench

import (
	"context"
	_ "embed"
	"fmt"
)

// ledgerRowsSQL makes the agent turn's floor: pgconvo's ledger functions
// with bodies that write the ledger's rows and decide nothing
// (ledger_rows.sql).
//
//go:embed ledger_rows.sql
var ledgerRowsSQL string

// withLedgerRows runs f with the ledger's rows alone in place of pgconvo's
// decision (bench.ledger_rows), committed so that every connection, pgbench's
// too, calls them, and puts pgconvo's functions back after f (the
// definitions bench.ledger_rows answered), whatever f answered.
func (r *run) withLedgerRows(ctx context.Context, f func() error) (err error) {
	if _, err := r.env.admin.Exec(ctx, ledgerRowsSQL); err != nil {
		return fmt.Errorf("creating bench.ledger_rows: %w", err)
	}
	var pgconvo []string
	if err := r.env.admin.QueryRow(ctx, `SELECT bench.ledger_rows()`).Scan(&pgconvo); err != nil {
		return fmt.Errorf("putting the ledger's rows alone in place: %w", err)
	}
	defer func() {
		for _, def := range pgconvo {
			if _, e := r.env.admin.Exec(context.WithoutCancel(ctx), def); e != nil && err == nil {
				err = fmt.Errorf("putting pgconvo's ledger functions back: %w", e)
			}
		}
	}()
	return f()
}
