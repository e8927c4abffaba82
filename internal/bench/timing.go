package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// inOwnerTx runs fn in one transaction that first names the owner, as the
// README tells an application to: set_config('convo.owner_id', owner, true)
// is SET LOCAL convo.owner_id with the owner as a parameter. It commits
// only if fn succeeds.
func inOwnerTx(ctx context.Context, conn *pgx.Conn, owner string, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
			return fmt.Errorf("setting the owner: %w", err)
		}
		return fn(tx)
	})
}

// readAll runs query in tx and reads every row.
func readAll(ctx context.Context, tx pgx.Tx, query string, args ...any) error {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	return rows.Err()
}

// step is one timed unit of work on a client's connection: one transaction
// or, for the agent turn, the few transactions of one turn. i counts the
// client's iterations, so that each picks its own conversation.
type step func(ctx context.Context, conn *pgx.Conn, client, i int) error

// sides is what a pair measured: every sample of each side.
type sides struct {
	a, b []time.Duration
}

// alternate runs iterations of a and b on each of clients connections at
// once, a then b on even iterations and b then a on odd ones, so that
// whatever drifts during the run (caches warming, tables growing, a noisy
// neighbour) reaches both sides alike. Every sample is kept.
func alternate(ctx context.Context, pool *pgxpool.Pool, clients, iterations int, a, b step) (sides, error) {
	var mu sync.Mutex
	var out sides
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pool.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Release()
			as := make([]time.Duration, 0, iterations)
			bs := make([]time.Duration, 0, iterations)
			for i := 0; i < iterations; i++ {
				first, second := a, b
				if i%2 == 1 {
					first, second = b, a
				}
				t1, err := timed(ctx, conn.Conn(), first, c, i)
				if err != nil {
					errs <- err
					return
				}
				t2, err := timed(ctx, conn.Conn(), second, c, i)
				if err != nil {
					errs <- err
					return
				}
				if i%2 == 1 {
					t1, t2 = t2, t1
				}
				as, bs = append(as, t1), append(bs, t2)
			}
			mu.Lock()
			out.a, out.b = append(out.a, as...), append(out.b, bs...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return sides{}, err
	}
	return out, nil
}

// timed runs s once and returns how long it took.
func timed(ctx context.Context, conn *pgx.Conn, s step, client, i int) (time.Duration, error) {
	start := time.Now()
	err := s(ctx, conn, client, i)
	return time.Since(start), err
}

// throughput runs s on clients connections at once for d and returns every
// sample (its count is the throughput).
func throughput(ctx context.Context, pool *pgxpool.Pool, clients int, d time.Duration, s step, offset int) ([]time.Duration, error) {
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	deadline := time.Now().Add(d)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pool.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Release()
			var mine []time.Duration
			for i := offset; time.Now().Before(deadline); i++ {
				t, err := timed(ctx, conn.Conn(), s, c, i)
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, t)
			}
			mu.Lock()
			out = append(out, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// median returns the median of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
