package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// text is the body of every synthetic text part: 200 characters, as in
// tests/bench_test.go, so the ratios compare with that benchmark's.
var text = strings.Repeat("0", 200)

// textParts is a message of one text part.
var textParts = `[{"type":"text","text":"` + text + `"}]`

// conversation is one synthetic conversation and its shape.
type conversation struct {
	id, owner string
	editEvery int // an edit every editEvery turns (0: never edited)
	effects   int // a settled effectful call every effects turns (0: none)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// shapes makes n conversations: every other one edited every 10 turns (20
// branch points on a path of 200), and a tenth of them (half of those
// edited, half not) with a settled effectful call every 20 turns. Owners are
// spread over 100 ids.
func shapes(n int) []conversation {
	out := make([]conversation, n)
	for i := range out {
		c := conversation{id: newUUID(), owner: fmt.Sprintf("owner-%03d", i%100)}
		if i%2 == 1 {
			c.editEvery = 10
		}
		if i%20 == 0 || i%20 == 5 {
			c.effects = 20
		}
		out[i] = c
	}
	return out
}

// load writes convs through the API, each with a live path of length
// messages, in server-side loops (bench.load_conversation) of batch
// conversations a transaction, on workers connections at once. It prints
// progress to e.log.
func (r *run) load(ctx context.Context, convs []conversation, length int, what string) error {
	const batch = 10
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, r.cfg.LoadWorkers)
	start := time.Now()
	lastReport := start
	var mu sync.Mutex
	for w := 0; w < r.cfg.LoadWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(batch)) - batch
				if lo >= len(convs) {
					return
				}
				hi := min(lo+batch, len(convs))
				if err := loadBatch(ctx, r.env.admin, convs[lo:hi], length); err != nil {
					errs <- fmt.Errorf("loading %s: %w", what, err)
					return
				}
				n := done.Add(int64(hi - lo))
				mu.Lock()
				if time.Since(lastReport) > 10*time.Second {
					lastReport = time.Now()
					r.logf("  loading %s: %d of %d conversations, %.0f s", what, n, len(convs), time.Since(start).Seconds())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	r.logf("  loaded %s: %d conversations with paths of %d messages in %.1f s",
		what, len(convs), length, time.Since(start).Seconds())
	return nil
}

// loadBatch loads convs in one transaction.
func loadBatch(ctx context.Context, db *pgxpool.Pool, convs []conversation, length int) error {
	ids := make([]string, len(convs))
	owners := make([]string, len(convs))
	edits := make([]int32, len(convs))
	effects := make([]int32, len(convs))
	for i, c := range convs {
		ids[i], owners[i], edits[i], effects[i] = c.id, c.owner, int32(c.editEvery), int32(c.effects)
	}
	_, err := db.Exec(ctx, `
		SELECT bench.load_conversation(c.id, c.owner, $5, c.edit_every, c.effects, $6)
		  FROM unnest($1::uuid[], $2::text[], $3::int[], $4::int[]) AS c(id, owner, edit_every, effects)`,
		ids, owners, edits, effects, length, text)
	return err
}

// copyToBaselines copies each conversation's live path into bench.flat
// and bench.flat_wide,
// and, for the conversations in writes, the whole tree and head log into
// the write baseline's tables, so both sides of a write start alike.
func (r *run) copyToBaselines(ctx context.Context, convs, writes []conversation) error {
	ids := func(cs []conversation) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.id
		}
		return out
	}
	for _, q := range []struct {
		stmt string
		ids  []string
	}{
		{`INSERT INTO bench.flat (conversation_id, seq, role, parts, created_at)
		  SELECT c.id, p.depth, p.role, p.parts, p.created_at
		    FROM unnest($1::uuid[]) AS c(id), LATERAL convo.path(c.id) p`, ids(convs)},
		{`INSERT INTO bench.flat_wide (conversation_id, seq, message_id, parent_id, role, parts, branch_reason, created_at,
		                               sibling_index, sibling_count, incomplete)
		  SELECT c.id, p.depth, p.message_id, p.parent_id, p.role, p.parts, p.branch_reason, p.created_at,
		         p.sibling_index, p.sibling_count, p.incomplete
		    FROM unnest($1::uuid[]) AS c(id), LATERAL convo.path(c.id) p`, ids(convs)},
		{`INSERT INTO bench.conversations (id, owner_id, head_message_id, created_at)
		  SELECT id, owner_id, head_message_id, created_at FROM convo.conversations WHERE id = ANY($1::uuid[])`, ids(writes)},
		{`INSERT INTO bench.messages (conversation_id, id, parent_id, role, parts, created_at)
		  SELECT conversation_id, id, parent_id, role, parts, created_at FROM convo.messages
		   WHERE conversation_id = ANY($1::uuid[])`, ids(writes)},
		{`INSERT INTO bench.head_log (conversation_id, head_message_id, previous_head_id, moved_at, reason)
		  SELECT conversation_id, head_message_id, previous_head_id, moved_at, reason FROM convo.conversation_head_log
		   WHERE conversation_id = ANY($1::uuid[]) ORDER BY seq`, ids(writes)},
	} {
		if _, err := r.env.admin.Exec(ctx, q.stmt, q.ids); err != nil {
			return fmt.Errorf("copying to the baselines: %w", err)
		}
	}
	return nil
}
