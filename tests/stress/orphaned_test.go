package stress

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestOrphanedMatchesReferenceOnRandomTrees builds 300 random conversation
// trees (seeds 1 to 300, thirty to a database) with appends, tool calls,
// edits, regenerations, head moves, settlements, compensations,
// confirmations and declines, and after every step compares
// orphaned_applied_effects with a reference computed in Go from the tables:
// an applied effect is orphaned when none of the messages of its linked
// calls (tool_effect_calls) is on the path from the root to the head
// (walked up parent_id from conversations.head_message_id).
//
// Two tools are used: buy_call (scope tool_call: every call executes or,
// as a re-run on another branch, waits for confirmation) and buy_fork
// (scope fork_args with two possible amounts: calls are reused, so one
// effect has calls on several branches). The test also models the ledger
// decisions in Go (execute, reuse, confirm and which effect a re-run
// repeats) and the tree, and checks that the tables agree with the model.
// $PGCONVO_ORPHAN_TREES sets how many trees (default 150, in batches of 30,
// a database each), each of 24 steps.
func TestOrphanedMatchesReferenceOnRandomTrees(t *testing.T) {
	t.Parallel()
	const perBatch, steps = 30, 24
	batches := (pgtest.EnvCount(t, "PGCONVO_ORPHAN_TREES", 150) + perBatch - 1) / perBatch
	var mu sync.Mutex
	total := orphStats{}
	t.Run("batches", func(t *testing.T) {
		for b := range batches {
			t.Run(fmt.Sprintf("seeds-%d-%d", b*perBatch+1, (b+1)*perBatch), func(t *testing.T) {
				t.Parallel()
				db := pgtest.NewDB(t)
				pgtest.EffRegisterPurchase(t, db, "buy_call", "tool_call", "20 seconds")
				pgtest.EffRegisterPurchase(t, db, "buy_fork", "fork_args", "20 seconds")
				var stats orphStats
				for i := range perBatch {
					seed := uint64(b*perBatch + i + 1)
					runOrphanTree(t, db, seed, steps, &stats)
				}
				mu.Lock()
				total.add(stats)
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	// The random trees must exercise what the view decides, or the
	// comparisons above proved little.
	t.Logf("over all trees: %+v", total)
	for what, n := range map[string]int{
		"checks with an orphaned effect":                          total.orphanedChecks,
		"checks with an applied effect live through a later call": total.liveThroughOther,
		"checks with an applied effect that is not orphaned":      total.liveChecks,
		"reuse decisions":   total.decisions["reuse"],
		"confirm decisions": total.decisions["confirm"],
		"execute decisions": total.decisions["execute"],
		"compensations":     total.ops["compensate"],
		"edits":             total.ops["edit"],
		"regenerations":     total.ops["regenerate"],
		"head moves":        total.ops["move_head"],
	} {
		if n < 50 {
			t.Errorf("%s: %d over all trees, want at least 50", what, n)
		}
	}
}

// orphStats counts what the random trees exercised.
type orphStats struct {
	orphanedChecks, liveChecks, liveThroughOther int
	decisions, ops                               map[string]int
}

func (s *orphStats) add(o orphStats) {
	s.orphanedChecks += o.orphanedChecks
	s.liveChecks += o.liveChecks
	s.liveThroughOther += o.liveThroughOther
	if s.decisions == nil {
		s.decisions, s.ops = map[string]int{}, map[string]int{}
	}
	for k, v := range o.decisions {
		s.decisions[k] += v
	}
	for k, v := range o.ops {
		s.ops[k] += v
	}
}

// orphDBCall is a row of tool_effect_calls; decided_at in microseconds.
type orphDBCall struct {
	ID        string `json:"id"`
	Message   string `json:"message"`
	Effect    string `json:"effect"`
	Decision  string `json:"decision"`
	Fork      string `json:"fork"`
	DecidedAt int64  `json:"decided_at"`
}

// orphState is what one query reads of a conversation: the tables and the view.
type orphState struct {
	Head     string `json:"head"`
	Messages []struct {
		ID     string `json:"id"`
		Parent string `json:"parent"`
	} `json:"messages"`
	Calls   []orphDBCall `json:"calls"`
	Effects []struct {
		ID          string `json:"id"`
		State       string `json:"state"`
		Repeats     string `json:"repeats"`
		ExternalRef string `json:"external_ref"`
		Amount      int64  `json:"amount"`
		Currency    string `json:"currency"`
		Tool        string `json:"tool"`
	} `json:"effects"`
	Orphans []struct {
		Effect      string   `json:"effect"`
		ToolCallIDs []string `json:"tool_call_ids"`
		ExternalRef string   `json:"external_ref"`
		Amount      int64    `json:"amount"`
		Currency    string   `json:"currency"`
		Tool        string   `json:"tool"`
	} `json:"orphans"`
}

const orphStateQuery = `
SELECT jsonb_build_object(
  'head', c.head_message_id,
  'messages', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'parent', m.parent_id)), '[]')
                 FROM convo.messages m WHERE m.conversation_id = c.id),
  'calls', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', l.tool_call_id, 'message', l.message_id, 'effect', l.effect_id,
                     'decision', l.decision, 'fork', l.fork_point_id,
                     'decided_at', (extract(epoch FROM l.decided_at) * 1000000)::bigint)), '[]')
              FROM convo.tool_effect_calls l WHERE l.conversation_id = c.id),
  'effects', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'state', e.state, 'repeats', e.repeats_effect_id,
                     'external_ref', e.external_ref, 'amount', e.amount_minor, 'currency', e.currency, 'tool', e.tool_name)), '[]')
                FROM convo.tool_effects e WHERE e.conversation_id = c.id)
)::text
FROM convo.conversations c WHERE c.id = $1`

// orphViewQuery reads the view's rows of a conversation. It runs as the
// application reads it (orphReadView): as convo_app with the owner set. A
// superuser sees every owner, and the view computes all their rows before
// the conversation's are picked out, so each read would grow with every
// tree of the batch.
const orphViewQuery = `
SELECT coalesce(jsonb_agg(jsonb_build_object('effect', o.effect_id, 'tool_call_ids', o.tool_call_ids,
         'external_ref', o.external_ref, 'amount', o.amount_minor, 'currency', o.currency, 'tool', o.tool_name)), '[]')::text
  FROM convo.orphaned_applied_effects o WHERE o.conversation_id = $1`

// orphReadView returns orphViewQuery's JSON for conv of owner, read in a
// transaction as convo_app with convo.owner_id set.
func orphReadView(ctx context.Context, db *pgxpool.Pool, owner, conv string) (string, error) {
	var raw string
	err := pgtest.InOwnerTx(db, owner, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE convo_app`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, orphViewQuery, conv).Scan(&raw)
	})
	return raw, err
}

// orphCall is a tool call in the Go model.
type orphCall struct {
	id, tool, msg, fork, key string
	amount                   int
	decision, effect         string
}

// orphModel is the Go model of one conversation: the tree, the head, the
// calls and the effects' states.
type orphModel struct {
	parent, role      map[string]string // message → parent ("" for a root), role
	messages          []string          // in creation order
	users, assistants []string
	head              string
	calls             []*orphCall       // in decision order
	state             map[string]string // effect → state
	effects           []string          // in creation order
	byKey             map[string]string // scope key of buy_fork (and each buy_call call) → effect
	nextCall, nextRef int
}

// forkOf is the fork point of a message: the parent of the nearest user
// message at or above it ("" for the conversation). Every user message
// of these trees has a text part.
func (m *orphModel) forkOf(msg string) string {
	for id := msg; id != ""; id = m.parent[id] {
		if m.role[id] == "user" {
			return m.parent[id]
		}
	}
	return ""
}

// onPath reports whether msg is head or one of its ancestors.
func (m *orphModel) onPath(msg, head string) bool {
	for id := head; id != ""; id = m.parent[id] {
		if id == msg {
			return true
		}
	}
	return false
}

func runOrphanTree(t *testing.T, db *pgxpool.Pool, seed uint64, steps int, stats *orphStats) {
	if stats.decisions == nil {
		stats.decisions, stats.ops = map[string]int{}, map[string]int{}
	}
	rng := rand.New(rand.NewPCG(seed, 0x0e1f))
	prompt := ""
	if seed%3 != 0 {
		prompt = "You sell credits."
	}
	owner := fmt.Sprintf("owner-%d", seed)
	conv := pgtest.CreateConversation(t, db, owner, prompt)
	m := &orphModel{parent: map[string]string{}, role: map[string]string{},
		state: map[string]string{}, byKey: map[string]string{}}
	addMessage := func(id, parent, role string) {
		m.parent[id], m.role[id], m.head = parent, role, id
		m.messages = append(m.messages, id)
		switch role {
		case "user":
			m.users = append(m.users, id)
		case "assistant":
			m.assistants = append(m.assistants, id)
		}
	}
	if prompt != "" {
		addMessage(pgtest.HeadOf(t, db, conv), "", "system")
	}
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	withState := func(state string) []string {
		var out []string
		for _, e := range m.effects {
			if m.state[e] == state {
				out = append(out, e)
			}
		}
		return out
	}
	// toolCalls makes the parts of an assistant message: one or two calls,
	// now and then none.
	var pendingCalls []*orphCall
	toolCalls := func() string {
		pendingCalls = nil
		if rng.IntN(6) == 0 {
			return pgtest.TextParts("No purchase.")
		}
		var calls []pgtest.EffCall
		for range 1 + rng.IntN(2) {
			m.nextCall++
			c := &orphCall{id: fmt.Sprintf("k%d", m.nextCall)}
			if rng.IntN(2) == 0 {
				c.tool, c.amount = "buy_call", 1+rng.IntN(1000)
			} else {
				c.tool, c.amount = "buy_fork", 100*(1+rng.IntN(2))
			}
			pendingCalls = append(pendingCalls, c)
			calls = append(calls, pgtest.EffBuy(c.id, c.tool, c.amount))
		}
		return pgtest.EffToolUses(calls...)
	}

	for step := range steps {
		var op string
		pendingCalls = nil
		switch r := rng.IntN(100); {
		case r < 12 && len(m.users) > 0:
			op = "edit"
			u := pick(m.users)
			id := pgtest.EditMsg(t, db, conv, u, pgtest.TextParts(fmt.Sprintf("edit %d", step)))
			addMessage(id, m.parent[u], "user")
		case r < 22 && len(m.assistants) > 0:
			op = "regenerate"
			a := pick(m.assistants)
			parts := toolCalls()
			id := pgtest.RegenerateMsg(t, db, conv, a, parts)
			addMessage(id, m.parent[a], "assistant")
		case r < 32 && len(m.messages) > 0:
			op = "move_head"
			to := pick(m.messages)
			pgtest.MoveHead(t, db, conv, to)
			m.head = to
		case r < 46 && len(withState("pending")) > 0:
			e := pick(withState("pending"))
			m.nextRef++
			if rng.IntN(4) == 0 {
				op = "fail"
				pgtest.EffFail(t, db, conv, e, "card_declined")
				m.state[e] = "failed"
			} else {
				op = "settle"
				pgtest.EffSettle(t, db, conv, e, fmt.Sprintf("ch_%d", m.nextRef))
				m.state[e] = "applied"
			}
		case r < 52 && len(withState("applied")) > 0:
			op = "compensate"
			e := pick(withState("applied"))
			m.nextRef++
			pgtest.EffCompensate(t, db, conv, e, fmt.Sprintf("re_%d", m.nextRef))
			m.state[e] = "compensated"
		case r < 58 && len(withState("awaiting_confirmation")) > 0:
			e := pick(withState("awaiting_confirmation"))
			if rng.IntN(3) == 0 {
				op = "decline"
				pgtest.EffDecline(t, db, conv, e, "support")
				m.state[e] = "failed"
			} else {
				op = "confirm"
				pgtest.EffConfirm(t, db, conv, e, "support")
				m.state[e] = "pending"
			}
		case r < 76 || len(m.messages) == 0:
			op = "append user"
			parent := m.head
			id := pgtest.AppendMsg(t, db, conv, "user", pgtest.TextParts(fmt.Sprintf("step %d", step)))
			addMessage(id, parent, "user")
		default:
			op = "append assistant"
			parent := m.head
			parts := toolCalls()
			id := pgtest.AppendMsg(t, db, conv, "assistant", parts)
			addMessage(id, parent, "assistant")
		}
		stats.ops[op]++
		where := fmt.Sprintf("seed %d, step %d (%s)", seed, step, op)

		var raw string
		if err := db.QueryRow(t.Context(), orphStateQuery, conv).Scan(&raw); err != nil {
			t.Fatalf("%s: reading the state: %v", where, err)
		}
		var st orphState
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			t.Fatalf("%s: decoding the state: %v", where, err)
		}
		if raw, err := orphReadView(t.Context(), db, owner, conv); err != nil {
			t.Fatalf("%s: reading orphaned_applied_effects: %v", where, err)
		} else if err := json.Unmarshal([]byte(raw), &st.Orphans); err != nil {
			t.Fatalf("%s: decoding orphaned_applied_effects: %v", where, err)
		}
		orphCheckModel(t, where, m, &st, pendingCalls, stats)
		orphCheckView(t, where, &st, stats)
	}
}

// orphCheckModel checks that the tables agree with the model (tree, head,
// effect states) and, for the calls the step appended, decides each in Go
// and checks the ledger's decision, effect and repeated effect.
func orphCheckModel(t *testing.T, where string, m *orphModel, st *orphState, newCalls []*orphCall, stats *orphStats) {
	if st.Head != m.head {
		t.Fatalf("%s: head %s, the model says %s", where, st.Head, m.head)
	}
	if len(st.Messages) != len(m.messages) {
		t.Fatalf("%s: %d messages, the model has %d", where, len(st.Messages), len(m.messages))
	}
	for _, msg := range st.Messages {
		if p, ok := m.parent[msg.ID]; !ok || p != msg.Parent {
			t.Fatalf("%s: message %s has parent %q, the model says %q (known: %v)", where, msg.ID, msg.Parent, p, ok)
		}
	}
	calls := map[string]orphDBCall{}
	for _, c := range st.Calls {
		calls[c.ID] = c
	}
	effects := map[string]string{} // id → repeats
	for _, e := range st.Effects {
		effects[e.ID] = e.Repeats
	}
	if len(calls) != len(m.calls)+len(newCalls) {
		t.Fatalf("%s: %d calls in the ledger, the model has %d + %d new", where, len(calls), len(m.calls), len(newCalls))
	}
	for _, c := range newCalls {
		got, ok := calls[c.id]
		if !ok {
			t.Fatalf("%s: call %s has no ledger row", where, c.id)
		}
		c.msg = m.head
		c.fork = m.forkOf(c.msg)
		if got.Fork != c.fork || got.Message != c.msg {
			t.Fatalf("%s: call %s: message %s, fork point %q; the model says %s, %q", where, c.id, got.Message, got.Fork, c.msg, c.fork)
		}
		c.key = c.id
		if c.tool == "buy_fork" {
			c.key = fmt.Sprintf("%s|%d", c.fork, c.amount)
		}
		var wantRepeats []string
		if e, ok := m.byKey[c.key]; ok {
			c.decision, c.effect = "reuse", e
		} else {
			var latest int64
			for _, prev := range m.calls {
				if prev.tool != c.tool || prev.fork != c.fork || m.onPath(prev.msg, c.msg) {
					continue
				}
				at := calls[prev.id].DecidedAt
				switch {
				case wantRepeats == nil || at > latest:
					wantRepeats, latest = []string{prev.effect}, at
				case at == latest:
					wantRepeats = append(wantRepeats, prev.effect)
				}
			}
			c.decision = "execute"
			if wantRepeats != nil {
				c.decision = "confirm"
			}
			c.effect = got.Effect
			if _, known := m.state[got.Effect]; known {
				t.Fatalf("%s: call %s (%s) names the existing effect %s", where, c.id, c.decision, got.Effect)
			}
			m.byKey[c.key] = got.Effect
			m.effects = append(m.effects, got.Effect)
			m.state[got.Effect] = map[string]string{"execute": "pending", "confirm": "awaiting_confirmation"}[c.decision]
		}
		if got.Decision != c.decision || got.Effect != c.effect {
			t.Fatalf("%s: call %s of %s: %s on %s; the model says %s on %s", where, c.id, c.tool, got.Decision, got.Effect, c.decision, c.effect)
		}
		if c.decision == "confirm" && !slices.Contains(wantRepeats, effects[c.effect]) {
			t.Fatalf("%s: call %s repeats %s; the model says one of %v", where, c.id, effects[c.effect], wantRepeats)
		}
		if c.decision != "confirm" && c.decision != "reuse" && effects[c.effect] != "" {
			t.Fatalf("%s: call %s executes an effect that repeats %s", where, c.id, effects[c.effect])
		}
		stats.decisions[c.decision]++
		m.calls = append(m.calls, c)
	}
	if len(st.Effects) != len(m.effects) {
		t.Fatalf("%s: %d effects, the model has %d", where, len(st.Effects), len(m.effects))
	}
	for _, e := range st.Effects {
		if m.state[e.ID] != e.State {
			t.Fatalf("%s: effect %s is %s, the model says %s", where, e.ID, e.State, m.state[e.ID])
		}
	}
}

// orphCheckView computes the orphaned effects from the tables alone and
// compares them with the view, row by row.
func orphCheckView(t *testing.T, where string, st *orphState, stats *orphStats) {
	parent := map[string]string{}
	for _, msg := range st.Messages {
		parent[msg.ID] = msg.Parent
	}
	onPath := map[string]bool{}
	for id := st.Head; id != ""; id = parent[id] {
		if onPath[id] {
			t.Fatalf("%s: a cycle through %s", where, id)
		}
		onPath[id] = true
	}
	linked := map[string][]string{} // effect → its call ids
	live := map[string]int{}        // effect → how many of its calls are on the path
	for _, c := range st.Calls {
		linked[c.Effect] = append(linked[c.Effect], c.ID)
		if onPath[c.Message] {
			live[c.Effect]++
		}
	}
	want := map[string]bool{}
	for _, e := range st.Effects {
		if e.State != "applied" {
			continue
		}
		if live[e.ID] == 0 {
			want[e.ID] = true
			continue
		}
		stats.liveChecks++
		if live[e.ID] < len(linked[e.ID]) {
			stats.liveThroughOther++ // some of its calls are off the path, one is on it
		}
	}
	got := map[string]bool{}
	for _, o := range st.Orphans {
		if got[o.Effect] {
			t.Fatalf("%s: effect %s is listed twice", where, o.Effect)
		}
		got[o.Effect] = true
	}
	for e := range want {
		if !got[e] {
			t.Errorf("%s: applied effect %s has no call on the path (calls %v), but the view does not list it", where, e, linked[e])
		}
	}
	for e := range got {
		if !want[e] {
			t.Errorf("%s: the view lists effect %s, which is not applied or has a call on the path (calls %v)", where, e, linked[e])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if len(want) > 0 {
		stats.orphanedChecks++
	}
	for _, o := range st.Orphans {
		wantCalls := slices.Sorted(slices.Values(linked[o.Effect]))
		gotCalls := slices.Sorted(slices.Values(o.ToolCallIDs))
		if !slices.Equal(gotCalls, wantCalls) {
			t.Fatalf("%s: orphan %s lists calls %v, want %v", where, o.Effect, o.ToolCallIDs, wantCalls)
		}
		for _, e := range st.Effects {
			if e.ID == o.Effect && (e.ExternalRef != o.ExternalRef || e.Amount != o.Amount || e.Currency != o.Currency || e.Tool != o.Tool) {
				t.Fatalf("%s: orphan row %+v does not match its effect %+v", where, o, e)
			}
		}
	}
}
