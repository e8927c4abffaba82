package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Growth is one large-input case timed at N and 4N: linear work takes about
// 4 times as long at 4N, quadratic work about 16 times.
type Growth struct {
	Case   string
	N1, N2 int
	T1, T2 time.Duration
	Note   string
	// Goal is the growth the case should have: 4x where the work is
	// linear in N, 1x where it should not depend on N at all.
	Goal string
}

// Factor is how many times longer 4N took than N.
func (g Growth) Factor() float64 { return float64(g.T2) / float64(g.T1) }

// largeOwner owns the large-input cases' conversations.
const largeOwner = "owner-large"

// scaled is n times the run's large-input scale, at least 4.
func (r *run) scaled(n int) int {
	return max(int(float64(n)*r.cfg.LargeScale), 4)
}

// asApp runs fn in one owner transaction on a connection of the app pool.
func (r *run) asApp(ctx context.Context, fn func(tx pgx.Tx) error) error {
	conn, err := r.app.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return inOwnerTx(ctx, conn.Conn(), largeOwner, fn)
}

// timeApp is asApp, timed.
func (r *run) timeApp(ctx context.Context, fn func(tx pgx.Tx) error) (time.Duration, error) {
	start := time.Now()
	err := r.asApp(ctx, fn)
	return time.Since(start), err
}

// newConversation creates a conversation with a system prompt as the app.
func (r *run) newConversation(ctx context.Context) (string, error) {
	var id string
	err := r.asApp(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT convo.create_conversation($1, $2)::text`, largeOwner, text).Scan(&id)
	})
	return id, err
}

// appendAs appends one message as the app and returns its id.
func (r *run) appendAs(ctx context.Context, conv, role, parts string) (string, error) {
	var id string
	err := r.asApp(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT convo.append_message($1, $2, $3::jsonb)::text`, conv, role, parts).Scan(&id)
	})
	return id, err
}

// large times every large-input case at N and 4N.
func (r *run) large(ctx context.Context) ([]Growth, error) {
	var out []Growth
	for _, c := range []struct {
		name, goal string
		n          int
		time       func(ctx context.Context, n int) (time.Duration, string, error)
	}{
		{"one message with N text parts (`append_message`)", "4x", r.scaled(2500), r.manyParts},
		{"one message with N effectful tool calls (`append_message`)", "4x", r.scaled(250), r.manyCalls},
		{"one effectful tool call at conversation depth N (the fork point walk)", "1x", r.scaled(1000), r.deepCall},
		{"the next effectful tool call of an agent turn of N calls and their results", "1x", r.scaled(250), r.longTurn},
		{"`alternatives` on a message with N siblings (after ANALYZE)", "4x", r.scaled(500), r.manySiblings},
		{"`search_conversations`, the first 20 of a word in one message of each of an owner's N conversations of 200 messages",
			"4x", r.scaled(100), r.searchCommon},
		{"`search_conversations`, a word in 20 messages of an owner's N conversations of 200 messages", "1x",
			r.scaled(100), r.searchRare},
	} {
		g := Growth{Case: c.name, N1: c.n, N2: 4 * c.n, Goal: c.goal}
		var note1, note2 string
		var err error
		if g.T1, note1, err = c.time(ctx, g.N1); err != nil {
			return nil, fmt.Errorf("%s, N=%d: %w", c.name, g.N1, err)
		}
		if g.T2, note2, err = c.time(ctx, g.N2); err != nil {
			return nil, fmt.Errorf("%s, N=%d: %w", c.name, g.N2, err)
		}
		if note1 != "" {
			g.Note = note1 + " at N, " + note2 + " at 4N"
		}
		r.logf("  %s: N=%d %s, 4N=%d %s: %.1fx", g.Case, g.N1, fmtDuration(g.T1), g.N2, fmtDuration(g.T2), g.Factor())
		out = append(out, g)
	}
	return out, nil
}

// manyParts times one append of a user message with n short text parts.
func (r *run) manyParts(ctx context.Context, n int) (time.Duration, string, error) {
	conv, err := r.newConversation(ctx)
	if err != nil {
		return 0, "", err
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"text","text":"part %d"}`, i)
	}
	b.WriteByte(']')
	t, err := r.timeApp(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', $2::jsonb)`, conv, b.String())
		return err
	})
	return t, "", err
}

// manyCalls times one append of an assistant message with n calls of the
// effectful tool, each with its own arguments (so each is a new effect).
func (r *run) manyCalls(ctx context.Context, n int) (time.Duration, string, error) {
	conv, err := r.newConversation(ctx)
	if err != nil {
		return 0, "", err
	}
	if _, err := r.appendAs(ctx, conv, "user", textParts); err != nil {
		return 0, "", err
	}
	prefix := "toolu_" + newUUID()[:8] + "_"
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"tool_use","id":"%s%d","name":"bench_purchase","input":{"amount_minor":%d,"currency":"EUR"}}`,
			prefix, i, i+1)
	}
	b.WriteByte(']')
	t, err := r.timeApp(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv, b.String())
		return err
	})
	return t, "", err
}

// deepCall times an assistant message with one effectful tool call at the
// end of a conversation n messages deep (the median of a few, each after a
// user turn), beside an assistant text message at the same depth.
func (r *run) deepCall(ctx context.Context, n int) (time.Duration, string, error) {
	conv := newUUID()
	if _, err := r.env.admin.Exec(ctx, `SELECT bench.load_conversation($1, $2, $3, 0, 0, $4)`, conv, largeOwner, n, text); err != nil {
		return 0, "", err
	}
	const repeats = 7
	var calls, texts []time.Duration
	for i := 0; i < repeats; i++ {
		for _, effect := range []bool{i%2 == 0, i%2 == 1} {
			if _, err := r.appendAs(ctx, conv, "user", textParts); err != nil {
				return 0, "", err
			}
			parts := textParts
			if effect {
				parts = `[{"type":"tool_use","id":"toolu_` + newUUID() + `","name":"bench_purchase","input":{"amount_minor":` +
					strconv.Itoa(i+1) + `,"currency":"EUR"}}]`
			}
			t, err := r.timeApp(ctx, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv, parts)
				return err
			})
			if err != nil {
				return 0, "", err
			}
			if effect {
				calls = append(calls, t)
			} else {
				texts = append(texts, t)
			}
		}
	}
	return median(calls), "a text answer " + fmtDuration(median(texts)), nil
}

// longTurn times an effectful call (the median of 5) appended to an agent
// turn that already holds n calls of the effectful tool, each followed by
// its result: its fork point and its re-run check must not cost the turn.
func (r *run) longTurn(ctx context.Context, n int) (time.Duration, string, error) {
	conv, err := r.newConversation(ctx)
	if err != nil {
		return 0, "", err
	}
	if _, err := r.appendAs(ctx, conv, "user", textParts); err != nil {
		return 0, "", err
	}
	round := func(tx pgx.Tx, i int) error {
		call := "toolu_" + newUUID()
		parts := `[{"type":"tool_use","id":"` + call + `","name":"bench_purchase","input":{"amount_minor":` +
			strconv.Itoa(i+1) + `,"currency":"EUR"}}]`
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv, parts); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'tool', $2::jsonb)`, conv,
			`[{"type":"tool_result","tool_use_id":"`+call+`","content":"ok"}]`)
		return err
	}
	if err := r.asApp(ctx, func(tx pgx.Tx) error {
		for i := 0; i < n; i++ {
			if err := round(tx, i); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, "", err
	}
	var ts []time.Duration
	for i := 0; i < 5; i++ {
		t, err := r.timeApp(ctx, func(tx pgx.Tx) error { return round(tx, n+i) })
		if err != nil {
			return 0, "", err
		}
		ts = append(ts, t)
	}
	return median(ts), "", nil
}

// manySiblings times alternatives (the median of 3) on a user message with
// n siblings, itself included, made by n-1 edits.
func (r *run) manySiblings(ctx context.Context, n int) (time.Duration, string, error) {
	conv, err := r.newConversation(ctx)
	if err != nil {
		return 0, "", err
	}
	msg, err := r.appendAs(ctx, conv, "user", textParts)
	if err != nil {
		return 0, "", err
	}
	if _, err := r.env.admin.Exec(ctx, `SELECT bench.add_siblings($1, $2, $3, $4)`, conv, msg, n-1, text); err != nil {
		return 0, "", err
	}
	if _, err := r.env.admin.Exec(ctx, `ANALYZE convo.messages`); err != nil {
		return 0, "", err
	}
	var ts []time.Duration
	for i := 0; i < 3; i++ {
		t, err := r.timeApp(ctx, func(tx pgx.Tx) error {
			return readAll(ctx, tx, `SELECT * FROM convo.alternatives($1, $2)`, conv, msg)
		})
		if err != nil {
			return 0, "", err
		}
		ts = append(ts, t)
	}
	return median(ts), "", nil
}

// searchCommon times search_conversations (the median of 5) for a word in
// one message of each of an owner's n conversations of 200 messages: n
// matches ranked for a page of 20. The owner is n's own (searchRare reads
// the same one), and the index holds the other n's documents too.
func (r *run) searchCommon(ctx context.Context, n int) (time.Duration, string, error) {
	return r.timeSearch(ctx, n, "zephyr")
}

// searchRare times search_conversations (the median of 5) for a word in 20
// messages of an owner's n conversations of 200 messages: the same 20
// matches at any n.
func (r *run) searchRare(ctx context.Context, n int) (time.Duration, string, error) {
	return r.timeSearch(ctx, n, "quokka")
}

// timeSearch times the first page of a search for word as the application
// runs it, in the conversations of an owner of n's own: n of them, loaded
// on first use (bench.add_searchable: every one names zephyr, 20 of them
// quokka).
func (r *run) timeSearch(ctx context.Context, n int, word string) (time.Duration, string, error) {
	owner := fmt.Sprintf("search-%d", n)
	var have int
	if err := r.env.admin.QueryRow(ctx, `SELECT count(*) FROM convo.conversations WHERE owner_id = $1`, owner).Scan(&have); err != nil {
		return 0, "", err
	}
	if have == 0 {
		if _, err := r.env.admin.Exec(ctx, `SELECT bench.add_searchable($1, $2, 'zephyr', 'quokka', 20)`, owner, n); err != nil {
			return 0, "", err
		}
		if _, err := r.env.admin.Exec(ctx, `VACUUM ANALYZE convo_private.message_search, convo.conversations, convo.messages`); err != nil {
			return 0, "", err
		}
	}
	var ts []time.Duration
	var found int
	for i := 0; i < 5; i++ {
		conn, err := r.app.Acquire(ctx)
		if err != nil {
			return 0, "", err
		}
		start := time.Now()
		err = inOwnerTx(ctx, conn.Conn(), owner, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT count(*) FROM convo.search_conversations($1, $2)`, owner, word).Scan(&found)
		})
		ts = append(ts, time.Since(start))
		conn.Release()
		if err != nil {
			return 0, "", err
		}
	}
	if want := min(20, n); found != want {
		return 0, "", fmt.Errorf("search for %s found %d, want %d", word, found, want)
	}
	return median(ts), "", nil
}

// fmtDuration prints d with three significant digits in a fitting unit.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}
