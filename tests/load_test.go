package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/migrator"
)

// Load and faults: clients hammer shared conversations
// with every kind of write, each logging outside the database what the
// database acknowledged; afterwards every acknowledged call must be there,
// once. PGCONVO_LOAD_SECONDS sets how long each runs (default: a short run
// for go test; the benchmark command runs the long one).

// loadSeconds is how long a load runs: $PGCONVO_LOAD_SECONDS, else def.
func loadSeconds(t testing.TB, def int) time.Duration {
	t.Helper()
	if v := os.Getenv("PGCONVO_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PGCONVO_LOAD_SECONDS %q: want a positive number of seconds", v)
		}
		return time.Duration(n) * time.Second
	}
	return time.Duration(def) * time.Second
}

// loadAck is one acknowledged call: the token it passed as p_moved_by (every
// head-moving call has its own) and the message it created or moved to.
type loadAck struct {
	conv, token, message string
}

// loadRun is the state shared by the clients of one load.
type loadRun struct {
	convs []string
	mu    sync.Mutex
	acks  []loadAck
	msgs  map[string][]string // conversation -> acknowledged messages
	ops   map[string]int      // what was done, for the log
}

func (r *loadRun) ack(a loadAck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, a)
	r.msgs[a.conv] = append(r.msgs[a.conv], a.message)
}

func (r *loadRun) count(op string) {
	r.mu.Lock()
	r.ops[op]++
	r.mu.Unlock()
}

func (r *loadRun) knownMessage(rng *rand.Rand, conv string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := r.msgs[conv]
	if len(ms) == 0 {
		return ""
	}
	return ms[rng.IntN(len(ms))]
}

// setupLoad registers the tools and creates n conversations through db.
func setupLoad(t testing.TB, db *pgxpool.Pool, n int) *loadRun {
	t.Helper()
	mustExec(t, db, `SELECT convo.register_tool('buy', true, '{"type": "object"}', 'tool_call', '1 second')`)
	r := &loadRun{msgs: map[string][]string{}, ops: map[string]int{}}
	for i := 0; i < n; i++ {
		conv := createConversation(t, db, "load-owner", "You are under load.")
		r.convs = append(r.convs, conv)
		r.msgs[conv] = []string{headOf(t, db, conv)}
	}
	return r
}

// loadClient runs one client until ctx ends: a random write on a random
// conversation, in a transaction that sets the owner, half of them
// compare-and-set. connect returns a pool on the current server (it may
// change after a crash); errors from a server that is down are retried.
func loadClient(ctx context.Context, id int, r *loadRun, connect func() *pgxpool.Pool, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	for step := 0; ctx.Err() == nil; step++ {
		db := connect()
		conv := r.convs[rng.IntN(len(r.convs))]
		token := fmt.Sprintf("c%d-s%d", id, step)
		var head *string
		if rng.IntN(2) == 0 {
			var h string
			if err := db.QueryRow(ctx, `SELECT head_message_id::text FROM convo.conversations WHERE id = $1`, conv).Scan(&h); err == nil {
				head = &h
			}
		}
		var op, sql string
		var args []any
		target := r.knownMessage(rng, conv)
		switch k := rng.IntN(10); {
		case k < 4:
			op, sql = "append", `SELECT convo.append_message($1, $2, $3, p_expected_head => $4, p_moved_by => $5)::text`
			args = []any{conv, []string{"user", "assistant"}[rng.IntN(2)], textParts("step " + token), head, token}
		case k < 5:
			op, sql = "tool_call", `SELECT convo.append_message($1, 'assistant', $2, p_expected_head => $3, p_moved_by => $4)::text`
			args = []any{conv, effToolUses(effBuy("toolu_"+token, "buy", 100+step)), head, token}
		case k < 7:
			op, sql = "edit", `SELECT convo.edit_and_resend($1, $2, $3, p_expected_head => $4, p_moved_by => $5)::text`
			args = []any{conv, target, textParts("edited " + token), head, token}
		case k < 8:
			op, sql = "regenerate", `SELECT convo.regenerate($1, $2, $3, p_expected_head => $4, p_moved_by => $5)::text`
			args = []any{conv, target, textParts("again " + token), head, token}
		default:
			op, sql = "switch", `SELECT convo.move_head($1, $2, 'switch', $3, $4)::text`
			if head == nil || target == *head {
				continue // a move to where the head is writes nothing: nothing to acknowledge
			}
			args = []any{conv, target, head, token}
		}
		var got string
		err := inOwnerTx(db, "load-owner", func(ctx context.Context, tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, sql, args...).Scan(&got); err != nil {
				return err
			}
			if op == "tool_call" {
				var effect, decision string
				if err := tx.QueryRow(ctx, `SELECT coalesce(effect_id::text, ''), decision FROM convo.effect_for_call($1, $2)`,
					conv, "toolu_"+token).Scan(&effect, &decision); err != nil {
					return err
				}
				if decision == "execute" && rng.IntN(10) > 0 { // leave a tenth pending: the sweeper's
					if _, err := tx.Exec(ctx, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3)`,
						conv, effect, "ch_"+token); err != nil {
						return err
					}
				}
			}
			return nil
		})
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			if op == "switch" {
				got = args[1].(string)
			}
			r.ack(loadAck{conv: conv, token: token, message: got})
			r.count(op)
		case errors.As(err, &pgErr) && (pgErr.Code == "CV001" || pgErr.Code == "CV004" || pgErr.Code == "CV011"):
			r.count(op + ":" + pgErr.Code) // a stale head, or a target of the wrong role: refused, nothing written
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code[:2] != "57" && pgErr.Code[:2] != "08":
			return fmt.Errorf("client %d step %d %s: %w", id, step, op, err)
		default:
			r.count("server gone") // a crash: unacknowledged, retried with the next step
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// checkLoad requires, after a load: every acknowledged call present exactly
// once (its token on one head-log row, naming its message), no token twice,
// every head-log chain linear, every head its last row, and self_check clean.
func checkLoad(t testing.TB, db *pgxpool.Pool, r *loadRun) {
	t.Helper()
	type row struct{ conv, head string }
	logged := map[string][]row{}
	rows, err := db.Query(context.Background(), `SELECT moved_by, conversation_id::text, head_message_id::text
		FROM convo.conversation_head_log WHERE moved_by IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var token string
		var r row
		if err := rows.Scan(&token, &r.conv, &r.head); err != nil {
			t.Fatal(err)
		}
		logged[token] = append(logged[token], r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for token, rs := range logged {
		if len(rs) > 1 {
			t.Errorf("token %s logged %d times: %v", token, len(rs), rs)
		}
	}
	for _, a := range r.acks {
		rs := logged[a.token]
		if len(rs) != 1 || rs[0].conv != a.conv || rs[0].head != a.message {
			t.Errorf("acknowledged %+v, logged %v", a, rs)
		}
	}
	requireEqual(t, "head-log rows that do not start where the one before ended", queryRow[int64](t, db, `
		SELECT count(*) FROM (SELECT previous_head_id, lag(head_message_id) OVER (PARTITION BY conversation_id ORDER BY seq) AS prev
		                        FROM convo.conversation_head_log) l
		 WHERE l.previous_head_id IS DISTINCT FROM l.prev`), int64(0))
	requireEqual(t, "self_check", failingChecks(t, db), "")
}

// TestLoad: 16 clients on the same conversations for a while (a short run
// in go test), then every acknowledged call is there once.
func TestLoad(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	r := setupLoad(t, db, 100)
	ctx, cancel := context.WithTimeout(context.Background(), loadSeconds(t, 8))
	defer cancel()
	seed := rand.Uint64()
	t.Logf("TestLoad seed %d", seed)
	var pools []*pgxpool.Pool
	for i := 0; i < 16; i++ {
		pools = append(pools, newPool(t, db.Config().ConnString(), pgx.QueryExecModeCacheStatement))
	}
	// Throughput per 10-second window, to see whether it holds as the
	// conversations grow.
	go func() {
		last := 0
		for w := 1; ; w++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
				r.mu.Lock()
				n := len(r.acks)
				r.mu.Unlock()
				t.Logf("window %d: %d calls acknowledged, %.0f/s", w, n-last, float64(n-last)/10)
				last = n
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- loadClient(ctx, i, r, func() *pgxpool.Pool { return pools[i] }, seed)
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("acknowledged %d calls: %v", len(r.acks), r.ops)
	if len(r.acks) < 100 {
		t.Fatalf("only %d calls acknowledged: the load did not run", len(r.acks))
	}
	checkLoad(t, db, r)
}

// TestCrashRecovery: the same load on a server of its own, SIGKILLed (the
// postmaster and all its processes) at random moments and restarted; after
// each recovery and at the end, every acknowledged call is there once, and
// the effects left pending past their deadline are listed by
// stale_pending_effects for a sweeper.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := localpg.StartEphemeral(ctx, localpg.Options{MaxConnections: 50, Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	m, err := migrator.Open(srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	m.Close()

	var mu sync.Mutex
	var current *pgxpool.Pool
	open := func() *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(srv.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 20
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return pool
	}
	current = open()
	r := setupLoad(t, current, 40)
	connect := func() *pgxpool.Pool {
		mu.Lock()
		defer mu.Unlock()
		return current
	}
	seed := rand.Uint64()
	t.Logf("TestCrashRecovery seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	load, cancel := context.WithTimeout(ctx, loadSeconds(t, 9))
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- loadClient(load, i, r, connect, seed)
		}(i)
	}
	crashes := 0
	for load.Err() == nil {
		select {
		case <-load.Done():
		case <-time.After(time.Duration(1000+rng.IntN(1500)) * time.Millisecond):
			if load.Err() != nil {
				break
			}
			if err := srv.Crash(); err != nil {
				t.Fatal(err)
			}
			crashes++
			if err := srv.Restart(ctx, localpg.Options{MaxConnections: 50, Durable: true}); err != nil {
				t.Fatalf("restarting after crash %d: %v", crashes, err)
			}
			mu.Lock()
			old := current
			current = open()
			mu.Unlock()
			old.Close()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	db := connect()
	defer db.Close()
	t.Logf("%d crashes, acknowledged %d calls: %v", crashes, len(r.acks), r.ops)
	if crashes < 2 || len(r.acks) < 50 {
		t.Fatalf("%d crashes and %d acknowledged calls: the test did not test", crashes, len(r.acks))
	}
	checkLoad(t, db, r)
	time.Sleep(1100 * time.Millisecond) // past the tool's deadline
	requireEqual(t, "pending effects past their deadline not listed by stale_pending_effects", queryRow[int64](t, db, `
		SELECT count(*) FROM convo.tool_effects e
		 WHERE e.state = 'pending' AND e.deadline_at < clock_timestamp()
		   AND NOT EXISTS (SELECT 1 FROM convo.stale_pending_effects s WHERE s.effect_id = e.id)`), int64(0))
	if queryRow[int64](t, db, `SELECT count(*) FROM convo.stale_pending_effects`) == 0 {
		t.Fatalf("no pending effect was left for the sweeper: the load settles too much")
	}
}
