package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// sidebarOwner owns the sidebar workload's conversations, and no other.
const sidebarOwner = "bench-sidebar"

// sidebar times a chat sidebar: the first page of 50 of one owner's
// conversations (five times as many as the load has: 10,000 at the
// default), newest activity first, through convo.conversations, beside the
// same page of an indexed flat table of the same rows (bench.sidebar, its
// index the one conversations() scans); and the page after a cursor
// beside the same on the flat table. The conversations are created through
// the API, each with one message, so each has a title and an activity
// time of its own.
func (r *run) sidebar(ctx context.Context) ([]Row, error) {
	n := max(5*r.cfg.Conversations, 100) // two pages at least
	start := time.Now()
	if _, err := r.env.admin.Exec(ctx, `
		DO $$
		BEGIN
		    FOR i IN 1 .. `+fmt.Sprint(n)+` LOOP
		        PERFORM convo.set_title(convo.create_conversation('`+sidebarOwner+`', 'You help.'), 'Conversation ' || i);
		    END LOOP;
		END;
		$$`); err != nil {
		return nil, fmt.Errorf("creating the sidebar's conversations: %w", err)
	}
	for _, st := range []string{
		`CREATE TABLE bench.sidebar AS
		   SELECT id, owner_id, title, created_at, last_activity_at, head_message_id, archived
		     FROM convo.conversations WHERE owner_id = '` + sidebarOwner + `'`,
		`CREATE INDEX ON bench.sidebar (owner_id, archived, last_activity_at DESC, id DESC)`,
		`GRANT SELECT ON bench.sidebar TO ` + appRole,
		`VACUUM ANALYZE bench.sidebar, convo.conversations`,
	} {
		if _, err := r.env.admin.Exec(ctx, st); err != nil {
			return nil, fmt.Errorf("the sidebar's baseline: %w", err)
		}
	}
	r.logf("  %d conversations of one owner in %.1f s", n, time.Since(start).Seconds())
	var cursorAt time.Time
	var cursorID string
	if err := r.env.admin.QueryRow(ctx, `SELECT last_activity_at, id::text FROM bench.sidebar
		ORDER BY last_activity_at DESC, id DESC OFFSET 49 LIMIT 1`).Scan(&cursorAt, &cursorID); err != nil {
		return nil, fmt.Errorf("the sidebar's cursor: %w", err)
	}
	const flat = `SELECT id, title, created_at, last_activity_at, head_message_id, archived FROM bench.sidebar
		WHERE owner_id = $1 AND NOT archived`
	page := func(query string, args ...any) step {
		return func(ctx context.Context, conn *pgx.Conn, client, i int) error {
			return inOwnerTx(ctx, conn, sidebarOwner, func(tx pgx.Tx) error {
				return readAll(ctx, tx, query, append([]any{sidebarOwner}, args...)...)
			})
		}
	}
	var rows []Row
	for _, w := range []struct {
		name, baseline string
		a, b           step
	}{
		{fmt.Sprintf("`conversations`, the first 50 of an owner's %d", n), "the same page of an indexed flat table",
			page(`SELECT * FROM convo.conversations($1, 50)`),
			page(flat + ` ORDER BY last_activity_at DESC, id DESC LIMIT 50`)},
		{"`conversations`, the next 50 after a cursor", "the same page of the flat table",
			page(`SELECT * FROM convo.conversations($1, 50, $2, false, $3)`, cursorAt, cursorID),
			page(flat+` AND (last_activity_at, id) < ($2, $3::uuid) ORDER BY last_activity_at DESC, id DESC LIMIT 50`, cursorAt, cursorID)},
	} {
		s, err := alternate(ctx, r.app, r.cfg.Clients, r.cfg.Iterations, w.a, w.b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.name, err)
		}
		row := latencyRow(w.name, w.baseline, s, "1.5x")
		r.logf("  %s: %.0f µs vs %.0f µs, %.2fx", row.Workload, row.A, row.B, row.Ratio)
		rows = append(rows, row)
	}
	return rows, nil
}
