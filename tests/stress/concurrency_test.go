package stress

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestConcurrentAppends: 8 goroutines append 25 messages each to one
// conversation at once, first plainly and then as compare-and-set (read the
// head, append with p_expected_head = that head, retry on CV001). Writes to
// one conversation serialize, so the result is one linear chain with one
// head-log row per move, and a refused compare-and-set leaves nothing.
func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 8, 25
	for _, withExpected := range []bool{false, true} {
		name := "plain"
		if withExpected {
			name = "with p_expected_head"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := widePool(t, pgtest.NewDB(t), workers+1)
			ctx := context.Background()
			conv := pgtest.CreateConversation(t, pool, "owner-1", "You are terse.")
			root := pgtest.HeadOf(t, pool, conv)

			type appended struct{ id, expected, worker string }
			var (
				mu      sync.Mutex
				done    []appended
				refused int
			)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					worker := fmt.Sprintf("worker-%d", w)
					for i := 0; i < perWorker; {
						var expected *string
						if withExpected {
							if err := pool.QueryRow(ctx, `SELECT head_message_id::text FROM convo.conversations WHERE id = $1`, conv).Scan(&expected); err != nil {
								errs <- err
								return
							}
						}
						var id string
						err := pool.QueryRow(ctx, `SELECT convo.append_message($1, 'user', $2, p_expected_head => $3, p_moved_by => $4)::text`,
							conv, pgtest.TextParts(fmt.Sprintf("%s message %d", worker, i)), expected, worker).Scan(&id)
						if withExpected && pgtest.SQLState(err) == "CV001" {
							mu.Lock()
							refused++
							mu.Unlock()
							continue // read the new head and try again
						}
						if err != nil {
							errs <- fmt.Errorf("%s append %d: %w", worker, i, err)
							return
						}
						a := appended{id: id, worker: worker}
						if expected != nil {
							a.expected = *expected
						}
						mu.Lock()
						done = append(done, a)
						mu.Unlock()
						i++
					}
				}()
			}
			wg.Wait()
			close(errs)
			var all []error
			for err := range errs {
				all = append(all, err)
			}
			if err := errors.Join(all...); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d appends, %d refused with CV001", len(done), refused)

			n := int64(len(done))
			pgtest.RequireEqual(t, "successful appends", n, int64(workers*perWorker))
			// Every CV001 left nothing behind: only the successes (and the root) are stored.
			pgtest.RequireCount(t, pool, n+1, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, conv)
			pgtest.RequireCount(t, pool, n+1, `SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1`, conv)
			// One head-log row per move, plus the create row.
			pgtest.RequireCount(t, pool, n+1, `SELECT count(*) FROM convo.conversation_head_log WHERE conversation_id = $1`, conv)

			// The chain is linear: depth 0..n, each message the child of the one before, no message with two children.
			rows, err := pool.Query(ctx, `SELECT id::text, coalesce(parent_id::text, ''), depth FROM convo.messages
				WHERE conversation_id = $1 ORDER BY depth, id`, conv)
			if err != nil {
				t.Fatal(err)
			}
			var byDepth []string // message id at each depth
			depthOf := map[string]int{}
			for rows.Next() {
				var id, parent string
				var depth int
				if err := rows.Scan(&id, &parent, &depth); err != nil {
					t.Fatal(err)
				}
				if depth != len(byDepth) {
					t.Fatalf("message %s has depth %d; want %d (one message per depth)", id, depth, len(byDepth))
				}
				want := ""
				if depth > 0 {
					want = byDepth[depth-1]
				}
				pgtest.RequireEqual(t, fmt.Sprintf("parent of the message at depth %d", depth), parent, want)
				byDepth, depthOf[id] = append(byDepth, id), depth
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			pgtest.RequireEqual(t, "root", byDepth[0], root)
			pgtest.RequireCount(t, pool, 0, `SELECT count(*) FROM (SELECT parent_id FROM convo.messages WHERE conversation_id = $1
				GROUP BY parent_id HAVING count(*) > 1) forks`, conv)
			head := pgtest.HeadOf(t, pool, conv)
			pgtest.RequireEqual(t, "head", head, byDepth[len(byDepth)-1])

			// The head log follows the chain: move i names the message at depth i,
			// previous_head_id links each move to the one before, the last names the head.
			moves := pgtest.ReadHeadHistory(t, pool, conv)
			pgtest.RequireHeadChain(t, moves)
			pgtest.RequireEqual(t, "last head-log row", moves[len(moves)-1].HeadMessageID, head)
			pgtest.RequireEqual(t, "last head-log row by seq", pgtest.QueryRow[string](t, pool, `
				SELECT head_message_id::text FROM convo.conversation_head_log WHERE conversation_id = $1
				 ORDER BY seq DESC LIMIT 1`, conv), head)
			workerOf := map[string]string{}
			for _, a := range done {
				workerOf[a.id] = a.worker
				if withExpected {
					// A compare-and-set append lands exactly under the head it expected.
					pgtest.RequireEqual(t, "parent of "+a.id, byDepth[depthOf[a.id]-1], a.expected)
				}
			}
			for i, mv := range moves {
				pgtest.RequireEqual(t, fmt.Sprintf("head-log row %d", i), mv.HeadMessageID, byDepth[i])
				if i > 0 {
					pgtest.RequireEqual(t, fmt.Sprintf("reason and mover of head-log row %d", i),
						[2]string{mv.Reason, mv.MovedBy}, [2]string{"append", workerOf[mv.HeadMessageID]})
				}
			}
		})
	}
}

// widePool opens a second pool on db's database with room for n
// connections (pgtest.NewDB's pool has 4), so that n goroutines really run at once.
func widePool(t testing.TB, db *pgxpool.Pool, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
