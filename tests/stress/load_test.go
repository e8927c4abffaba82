package stress

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// Load and faults: clients hammer shared conversations
// with every kind of write, each logging outside the database what the
// database acknowledged; afterwards every acknowledged call must be there,
// once. Each run is sized by counts, never by what fits in a time window
// (a slower machine only takes longer): $PGCONVO_LOAD_CALLS acknowledged
// calls, and for the crash run $PGCONVO_CRASHES crashes. loadBound is the
// generous time a run may take before it fails saying what it reached.

// loadBound bounds the time of a run of calls acknowledged calls and
// crashes crashes: five minutes, plus 10 ms a call (a rate a tenth of what
// a loaded 2-core machine reaches) and 10 s a crash. A run that reaches it
// fails, naming how far it got.
func loadBound(calls, crashes int) time.Duration {
	return 5*time.Minute + time.Duration(calls)*10*time.Millisecond + time.Duration(crashes)*10*time.Second
}

// acked returns how many calls the load acknowledged so far.
func (r *loadRun) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks)
}

// waitAcked waits until the load acknowledged at least n calls, or until
// ctx (the run's bound) ends, and reports whether it got there.
func (r *loadRun) waitAcked(ctx context.Context, n int) bool {
	for r.acked() < n {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
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
	pgtest.MustExec(t, db, `SELECT convo.register_tool('buy', true, '{"type": "object"}', 'tool_call', '1 second')`)
	r := &loadRun{msgs: map[string][]string{}, ops: map[string]int{}}
	for i := 0; i < n; i++ {
		conv := pgtest.CreateConversation(t, db, "load-owner", "You are under load.")
		r.convs = append(r.convs, conv)
		r.msgs[conv] = []string{pgtest.HeadOf(t, db, conv)}
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
			args = []any{conv, []string{"user", "assistant"}[rng.IntN(2)], pgtest.TextParts("step " + token), head, token}
		case k < 5:
			op, sql = "tool_call", `SELECT convo.append_message($1, 'assistant', $2, p_expected_head => $3, p_moved_by => $4)::text`
			args = []any{conv, pgtest.EffToolUses(pgtest.EffBuy("toolu_"+token, "buy", 100+step)), head, token}
		case k < 7:
			op, sql = "edit", `SELECT convo.edit_and_resend($1, $2, $3, p_expected_head => $4, p_moved_by => $5)::text`
			args = []any{conv, target, pgtest.TextParts("edited " + token), head, token}
		case k < 8:
			op, sql = "regenerate", `SELECT convo.regenerate($1, $2, $3, p_expected_head => $4, p_moved_by => $5)::text`
			args = []any{conv, target, pgtest.TextParts("again " + token), head, token}
		default:
			op, sql = "switch", `SELECT convo.move_head($1, $2, 'switch', $3, $4)::text`
			if head == nil || target == *head {
				continue // a move to where the head is writes nothing: nothing to acknowledge
			}
			args = []any{conv, target, head, token}
		}
		var got string
		err := pgtest.InOwnerTx(db, "load-owner", func(ctx context.Context, tx pgx.Tx) error {
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
	pgtest.RequireEqual(t, "head-log rows that do not start where the one before ended", pgtest.QueryRow[int64](t, db, `
		SELECT count(*) FROM (SELECT previous_head_id, lag(head_message_id) OVER (PARTITION BY conversation_id ORDER BY seq) AS prev
		                        FROM convo.conversation_head_log) l
		 WHERE l.previous_head_id IS DISTINCT FROM l.prev`), int64(0))
	pgtest.RequireEqual(t, "self_check", pgtest.FailingChecks(t, db), "")
}

// TestLoad: 16 clients on the same conversations until they have
// acknowledged $PGCONVO_LOAD_CALLS calls (default 2000), then every
// acknowledged call is there once.
func TestLoad(t *testing.T) {
	t.Parallel()
	calls := pgtest.EnvCount(t, "PGCONVO_LOAD_CALLS", 2000)
	db := pgtest.NewDB(t)
	r := setupLoad(t, db, 100)
	bound, cancelBound := context.WithTimeout(context.Background(), loadBound(calls, 0))
	defer cancelBound()
	ctx, stop := context.WithCancel(bound)
	defer stop()
	seed := rand.Uint64()
	t.Logf("TestLoad seed %d, until %d calls are acknowledged", seed, calls)
	var pools []*pgxpool.Pool
	for i := 0; i < 16; i++ {
		pools = append(pools, pgtest.NewPool(t, db.Config().ConnString(), pgx.QueryExecModeCacheStatement))
	}
	// Throughput per 10-second window, to see whether it holds as the
	// conversations grow (a log line, not a condition: the machine may be
	// busy).
	go func() {
		last := 0
		for w := 1; ; w++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
				n := r.acked()
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
	reached := r.waitAcked(ctx, calls)
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("acknowledged %d calls: %v", len(r.acks), r.ops)
	if !reached {
		t.Fatalf("%d of %d calls acknowledged in %v: the load did not get there", len(r.acks), calls, loadBound(calls, 0))
	}
	checkLoad(t, db, r)
}

// TestCrashRecovery: the same load on a server of its own, SIGKILLed (the
// postmaster and all its processes) $PGCONVO_CRASHES times (default 3),
// each after a random number (20 to 80) of newly acknowledged calls, and
// restarted; it goes on until at least $PGCONVO_LOAD_CALLS/4 calls (default
// 500) are acknowledged. Then every call acknowledged, before a crash or
// after it, is there once, and the effects left pending past their
// deadline are listed by stale_pending_effects for a sweeper.
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
	crashesWanted := pgtest.EnvCount(t, "PGCONVO_CRASHES", 3)
	callsWanted := pgtest.EnvCount(t, "PGCONVO_LOAD_CALLS", 2000) / 4
	seed := rand.Uint64()
	t.Logf("TestCrashRecovery seed %d, until %d crashes and %d acknowledged calls", seed, crashesWanted, callsWanted)
	rng := rand.New(rand.NewPCG(seed, 0))
	bound, cancelBound := context.WithTimeout(ctx, loadBound(callsWanted, crashesWanted))
	defer cancelBound()
	load, stop := context.WithCancel(bound)
	defer stop()
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
	reached := true
	for crashes < crashesWanted {
		if !r.waitAcked(load, r.acked()+20+rng.IntN(61)) {
			reached = false
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
	reached = reached && r.waitAcked(load, callsWanted)
	stop()
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
	if !reached {
		t.Fatalf("%d of %d crashes and %d of %d acknowledged calls in %v: the load did not get there",
			crashes, crashesWanted, len(r.acks), callsWanted, loadBound(callsWanted, crashesWanted))
	}
	checkLoad(t, db, r)
	time.Sleep(1100 * time.Millisecond) // past the tool's deadline
	pgtest.RequireEqual(t, "pending effects past their deadline not listed by stale_pending_effects", pgtest.QueryRow[int64](t, db, `
		SELECT count(*) FROM convo.tool_effects e
		 WHERE e.state = 'pending' AND e.deadline_at < clock_timestamp()
		   AND NOT EXISTS (SELECT 1 FROM convo.stale_pending_effects s WHERE s.effect_id = e.id)`), int64(0))
	if pgtest.QueryRow[int64](t, db, `SELECT count(*) FROM convo.stale_pending_effects`) == 0 {
		t.Fatalf("no pending effect was left for the sweeper: the load settles too much")
	}
}
