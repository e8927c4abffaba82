package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// checkFloorPieces checks, on a server the tiny run holds, that each piece
// of floor.sql removes what it names: with the piece's statements run (and
// rolled back), an append or a path read as the application's role shows
// the piece gone, and without them, there.
func checkFloorPieces(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn := heldConn(t, url)
	conv, owner := firstPick(t, conn, "writes")
	edited, editedOwner := firstPick(t, conn, "edited")
	// Each check runs as the application's role for owner, after the
	// piece's statements, and says whether the piece is there.
	type check struct {
		workload, piece string
		owner           string
		there           func(tx pgx.Tx) (bool, error)
	}
	appendOne := func(tx pgx.Tx, parts string) (string, error) {
		var id string
		err := tx.QueryRow(ctx, `SELECT convo.append_message($1, 'user', $2::jsonb)::text`, conv, parts).Scan(&id)
		return id, err
	}
	count := func(tx pgx.Tx, query string, args ...any) (int, error) {
		var n int
		err := tx.QueryRow(ctx, query, args...).Scan(&n)
		return n, err
	}
	checks := []check{
		{"append", "the owner check", "someone-else", func(tx pgx.Tx) (bool, error) {
			_, err := appendOne(tx, textParts)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "CV002" {
				return true, nil
			}
			return false, err
		}},
		{"append", "the checks of each part", owner, func(tx pgx.Tx) (bool, error) {
			_, err := appendOne(tx, `[{"type": "text"}]`)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "CV008" {
				return true, nil
			}
			return false, err
		}},
		{"append", "the search index", owner, func(tx pgx.Tx) (bool, error) {
			id, err := appendOne(tx, `[{"type": "text", "text": "a floorcheck word"}]`)
			if err != nil {
				return false, err
			}
			n, err := count(tx, `SELECT count(*) FROM convo.search_conversations($1, 'floorcheck') WHERE message_id = $2::uuid`, owner, id)
			return n == 1, err
		}},
		{"append", "the head-log row", owner, func(tx pgx.Tx) (bool, error) {
			id, err := appendOne(tx, textParts)
			if err != nil {
				return false, err
			}
			n, err := count(tx, `SELECT count(*) FROM convo.head_history($1) WHERE head_message_id = $2::uuid`, conv, id)
			return n == 1, err
		}},
		{"append", "the live path", owner, func(tx pgx.Tx) (bool, error) {
			id, err := appendOne(tx, textParts)
			if err != nil {
				return false, err
			}
			n, err := count(tx, `SELECT count(*) FROM convo.path($1) WHERE message_id = $2::uuid`, conv, id)
			return n == 1, err
		}},
		{"a tool call", "the argument check", owner, func(tx pgx.Tx) (bool, error) {
			// An amount below the schema's minimum: rejected when checked.
			if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', '[{"type": "tool_use", "id": "toolu_floorcheck",
				"name": "bench_purchase", "input": {"amount_minor": 0, "currency": "EUR"}}]'::jsonb)`, conv); err != nil {
				return false, err
			}
			n, err := count(tx, `SELECT count(*) FROM convo.effect_for_call($1, 'toolu_floorcheck') WHERE decision = 'rejected'`, conv)
			return n == 1, err
		}},
		{"a tool call", "the effect's event row", owner, func(tx pgx.Tx) (bool, error) {
			if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', '[{"type": "tool_use", "id": "toolu_floorevent",
				"name": "bench_purchase", "input": {"amount_minor": 17, "currency": "EUR"}}]'::jsonb)`, conv); err != nil {
				return false, err
			}
			var effect string
			if err := tx.QueryRow(ctx, `SELECT effect_id::text FROM convo.effect_for_call($1, 'toolu_floorevent')`, conv).Scan(&effect); err != nil {
				return false, err
			}
			// The events, which the application's role does not read, as the superuser.
			if _, err := tx.Exec(ctx, `SELECT set_config('role', 'none', true)`); err != nil {
				return false, err
			}
			n, err := count(tx, `SELECT count(*) FROM convo.tool_effect_events WHERE effect_id = $1::uuid`, effect)
			return n == 1, err
		}},
		{"path, edited", "the sibling counts", editedOwner, func(tx pgx.Tx) (bool, error) {
			n, err := count(tx, `SELECT count(*) FROM convo.path($1) WHERE sibling_count > 1`, edited)
			return n > 0, err
		}},
	}
	for _, c := range checks {
		for _, removed := range []bool{false, true} {
			there, err := func() (bool, error) {
				tx, err := conn.Begin(ctx)
				if err != nil {
					return false, err
				}
				defer tx.Rollback(ctx)
				if removed {
					var stmts []string
					if err := tx.QueryRow(ctx, `SELECT statements FROM bench.floor_pieces WHERE workload = $1 AND piece = $2`,
						c.workload, c.piece).Scan(&stmts); err != nil {
						return false, err
					}
					for _, s := range stmts {
						if _, err := tx.Exec(ctx, s); err != nil {
							return false, err
						}
					}
				}
				if _, err := tx.Exec(ctx, `SELECT set_config('role', $1, true), set_config('convo.owner_id', $2, true)`, appRole, c.owner); err != nil {
					return false, err
				}
				return c.there(tx)
			}()
			switch {
			case err != nil:
				t.Errorf("%s, %s (removed: %v): %v", c.workload, c.piece, removed, err)
			case there == removed:
				t.Errorf("%s, %s: removed %v, yet the piece is there: %v", c.workload, c.piece, removed, there)
			}
		}
	}
}

// heldConn connects to the server the tiny run holds, as the superuser,
// until the test ends.
func heldConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// firstPick is the first conversation of a set of bench.picks, and its owner.
func firstPick(t *testing.T, conn *pgx.Conn, set string) (conv, owner string) {
	t.Helper()
	if err := conn.QueryRow(context.Background(), `SELECT conversation_id::text, owner_id FROM bench.picks WHERE set_name = $1 AND k = 1`, set).
		Scan(&conv, &owner); err != nil {
		t.Fatal(err)
	}
	return conv, owner
}
