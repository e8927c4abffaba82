package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Attacks on the re-run lookup by place (0048): each call's row keeps its
// message's branch and depth, and rerun_candidate finds the calls off a
// new call's path by place. These tests compare its decisions with an
// oracle computed from the contract's definition over trees built by the
// API, restore documents whose calls are placed wrongly or decided out of
// their branch's order, forge placements directly, and count what the
// lookup reads beside a long turn on another branch.

// oMsg is a message of the oracle's model of a conversation.
type oMsg struct {
	id, parent, role string
	person           bool // a user message with a part other than tool_result
	calls            []oPart
}

// oPart is one tool_use part.
type oPart struct {
	id, tool string
	amount   int
}

// oCall is a recorded call as the oracle knows it (effect and time read
// back from the database once decided).
type oCall struct {
	id, tool, msg, fork, decision, effect string
	at                                    time.Time
}

// oracleScopes: the effectful tools and their idempotency scopes; "look"
// is registered without effects (replay) and "ghost" is not registered.
var oracleScopes = map[string]string{"buy": "tool_call", "buyc": "conversation_args", "buyf": "fork_args"}

type oracleConv struct {
	t          *testing.T
	db         *pgxpool.Pool
	seed       int
	rng        *rand.Rand
	conv       string
	msgs       map[string]*oMsg
	order      []string
	calls      []*oCall
	keys       map[string]string // scope key (as the oracle spells it) -> effect
	n          int
	log        []string
	usedConvID bool
}

func (o *oracleConv) fail(format string, args ...any) {
	o.t.Helper()
	tail := o.log
	if len(tail) > 12 {
		tail = tail[len(tail)-12:]
	}
	o.t.Fatalf("seed %d: %s\n  last operations:\n    %s", o.seed, fmt.Sprintf(format, args...), strings.Join(tail, "\n    "))
}

// forkOf is the contract's fork point of a call of message m: the parent
// of the nearest person's turn at or above m, "" for the conversation.
func (o *oracleConv) forkOf(m string) string {
	for id := m; id != ""; id = o.msgs[id].parent {
		if o.msgs[id].person {
			return o.msgs[id].parent
		}
	}
	return ""
}

// onPath: x is m or one of its ancestors.
func (o *oracleConv) onPath(x, m string) bool {
	for id := m; id != ""; id = o.msgs[id].parent {
		if id == x {
			return true
		}
	}
	return false
}

func (o *oracleConv) newParts(k int) []oPart {
	var parts []oPart
	for i := 0; i < k; i++ {
		o.n++
		p := oPart{id: fmt.Sprintf("s%02dc%04d", o.seed, o.n), amount: 1 + o.rng.Intn(3)}
		switch r := o.rng.Intn(20); {
		case r < 6:
			p.tool = "buy"
		case r < 10:
			p.tool = "buyc"
		case r < 14:
			p.tool = "buyf"
		case r < 17:
			p.tool = "look"
		default:
			p.tool = "ghost"
		}
		if o.rng.Intn(10) == 0 {
			p.amount = 0 // below the schema's minimum: rejected
		}
		parts = append(parts, p)
	}
	return parts
}

func (o *oracleConv) callCount() int {
	if o.rng.Intn(20) == 0 {
		return 9 // past the eighth part: record_tool_call_planned
	}
	return 1 + o.rng.Intn(3)
}

func partsJSON(parts []oPart) string {
	var calls []effCall
	for _, p := range parts {
		if p.tool == "look" {
			calls = append(calls, effCall{ID: p.id, Name: p.tool, Input: map[string]any{"q": p.amount}})
		} else {
			calls = append(calls, effBuy(p.id, p.tool, p.amount))
		}
	}
	return effToolUses(calls...)
}

// added records a new message written by the API, then checks each of its
// calls against the oracle in order.
func (o *oracleConv) added(id, parent, role string, person bool, parts []oPart) {
	o.t.Helper()
	if id == "" {
		o.fail("no message id returned")
	}
	o.msgs[id] = &oMsg{id: id, parent: parent, role: role, person: person, calls: parts}
	o.order = append(o.order, id)
	if len(parts) == 0 {
		return
	}
	type dbRow struct {
		id, decision, effect, fork, repeats string
		at                                  time.Time
	}
	rows, err := o.db.Query(context.Background(), `
		SELECT l.tool_call_id, l.decision, coalesce(l.effect_id::text, ''), coalesce(l.fork_point_id::text, ''),
		       l.decided_at, coalesce(e.repeats_effect_id::text, '')
		  FROM convo.tool_effect_calls l
		  LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
		 WHERE l.conversation_id = $1 AND l.message_id = $2 ORDER BY l.ordinal`, o.conv, id)
	if err != nil {
		o.fail("reading calls: %v", err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dbRow, error) {
		var d dbRow
		err := r.Scan(&d.id, &d.decision, &d.effect, &d.fork, &d.at, &d.repeats)
		return d, err
	})
	if err != nil {
		o.fail("reading calls: %v", err)
	}
	byID := map[string]dbRow{}
	for _, d := range got {
		byID[d.id] = d
	}
	fork := o.forkOf(id)
	for _, p := range parts {
		d, ok := byID[p.id]
		if p.tool == "ghost" {
			if ok {
				o.fail("call %s of an unregistered tool has a ledger row", p.id)
			}
			continue
		}
		if !ok {
			o.fail("call %s (%s) has no ledger row", p.id, p.tool)
		}
		if d.fork != fork {
			o.fail("call %s: fork point %q, the contract's is %q", p.id, d.fork, fork)
		}
		// The oracle's decision.
		want, wantEffect, wantRepeats := "", "", ""
		key := ""
		switch {
		case p.tool == "look":
			want = "replay"
		case p.amount == 0:
			want = "rejected"
		default:
			switch oracleScopes[p.tool] {
			case "conversation_args":
				key = fmt.Sprintf("c|%s|%d", p.tool, p.amount)
			case "fork_args":
				key = fmt.Sprintf("f|%s|%s|%d", fork, p.tool, p.amount)
			default:
				key = "t|" + p.id
			}
			if e, ok := o.keys[key]; ok {
				want, wantEffect = "reuse", e
				break
			}
			var latest *oCall
			for _, c := range o.calls {
				if c.tool != p.tool || c.fork != fork || o.onPath(c.msg, id) {
					continue
				}
				if c.decision != "execute" && c.decision != "reuse" && c.decision != "confirm" {
					continue
				}
				if latest == nil || c.at.After(latest.at) || (c.at.Equal(latest.at) && c.id > latest.id) {
					latest = c
				}
			}
			if latest == nil {
				want = "execute"
			} else {
				want, wantRepeats = "confirm", latest.effect
			}
		}
		if d.decision != want {
			o.fail("call %s (%s, amount %d, fork %q): decision %s, the contract's is %s (repeats %s)",
				p.id, p.tool, p.amount, fork, d.decision, want, o.describeEffect(wantRepeats))
		}
		switch want {
		case "reuse":
			if d.effect != wantEffect {
				o.fail("call %s reuses effect %s, the oracle's is %s", p.id, o.describeEffect(d.effect), o.describeEffect(wantEffect))
			}
		case "execute", "confirm":
			if d.repeats != wantRepeats {
				o.fail("call %s (%s): repeats_effect_id %s, the latest call off its path is %s",
					p.id, want, o.describeEffect(d.repeats), o.describeEffect(wantRepeats))
			}
			o.keys[key] = d.effect
		}
		o.calls = append(o.calls, &oCall{id: p.id, tool: p.tool, msg: id, fork: fork, decision: d.decision, effect: d.effect, at: d.at})
	}
}

// describeEffect names the calls linked to an effect, for messages.
func (o *oracleConv) describeEffect(e string) string {
	if e == "" {
		return "none"
	}
	var names []string
	for _, c := range o.calls {
		if c.effect == e {
			names = append(names, fmt.Sprintf("%s(%s, msg %s, %s)", c.id, c.decision, c.msg[:8], c.at.Format("15:04:05.000000")))
		}
	}
	return e[:8] + " of " + strings.Join(names, ", ")
}

func (o *oracleConv) head() string { return headOf(o.t, o.db, o.conv) }

func (o *oracleConv) pick(role string, pred func(m *oMsg) bool) *oMsg {
	var c []*oMsg
	for _, id := range o.order {
		m := o.msgs[id]
		if (role == "" || m.role == role) && (pred == nil || pred(m)) {
			c = append(c, m)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[o.rng.Intn(len(c))]
}

func resultsFor(m *oMsg) string {
	var ids []string
	for _, p := range m.calls {
		ids = append(ids, p.id)
	}
	return effToolResults(ids...)
}

// step makes one random write through the API.
func (o *oracleConv) step() {
	o.t.Helper()
	head := o.head()
	if head == "" {
		id := appendMsg(o.t, o.db, o.conv, "user", textParts("start"))
		o.log = append(o.log, "append user root "+id[:8])
		o.added(id, "", "user", true, nil)
		return
	}
	hm := o.msgs[head]
	switch r := o.rng.Intn(100); {
	case r < 12: // a person's turn
		id := appendMsg(o.t, o.db, o.conv, "user", textParts("more"))
		o.log = append(o.log, "append user "+id[:8]+" under "+head[:8])
		o.added(id, head, "user", true, nil)
	case r < 40: // an agent's calls
		parts := o.newParts(o.callCount())
		id := appendMsg(o.t, o.db, o.conv, "assistant", partsJSON(parts))
		o.log = append(o.log, fmt.Sprintf("append assistant %s under %s: %v", id[:8], head[:8], parts))
		o.added(id, head, "assistant", false, parts)
	case r < 60: // results of the head's calls (the agent loop)
		if len(hm.calls) == 0 {
			return
		}
		role := "user"
		if o.rng.Intn(3) == 0 {
			role = "tool"
		}
		id := appendMsg(o.t, o.db, o.conv, role, resultsFor(hm))
		o.log = append(o.log, fmt.Sprintf("append %s results %s under %s", role, id[:8], head[:8]))
		o.added(id, head, role, false, nil)
	case r < 70: // regenerate an assistant message
		m := o.pick("assistant", nil)
		if m == nil {
			return
		}
		var parts []oPart
		body := textParts("regenerated")
		if o.rng.Intn(5) > 0 {
			parts = o.newParts(o.callCount())
			body = partsJSON(parts)
		}
		id := regenerateMsg(o.t, o.db, o.conv, m.id, body)
		o.log = append(o.log, fmt.Sprintf("regenerate %s as %s: %v", m.id[:8], id[:8], parts))
		o.added(id, m.parent, "assistant", false, parts)
	case r < 80: // edit a user message: a new person's turn, or other results
		m := o.pick("user", nil)
		if m == nil {
			return
		}
		if p := o.msgs[m.parent]; p != nil && len(p.calls) > 0 && o.rng.Intn(3) == 0 {
			id := editMsg(o.t, o.db, o.conv, m.id, resultsFor(p))
			o.log = append(o.log, fmt.Sprintf("edit %s as results %s", m.id[:8], id[:8]))
			o.added(id, m.parent, "user", false, nil)
		} else {
			id := editMsg(o.t, o.db, o.conv, m.id, textParts("edited"))
			o.log = append(o.log, fmt.Sprintf("edit %s as text %s", m.id[:8], id[:8]))
			o.added(id, m.parent, "user", true, nil)
		}
	case r < 88: // move the head to an older message
		m := o.pick("", nil)
		moveHead(o.t, o.db, o.conv, m.id)
		o.log = append(o.log, "move head to "+m.id[:8])
	case r < 95: // a generation's answer under any message
		m := o.pick("", nil)
		parts := o.newParts(o.callCount())
		gen := beginGeneration(o.t, o.db, o.conv, m.id, "model-1")
		id := completeGeneration(o.t, o.db, o.conv, gen, partsJSON(parts))
		o.log = append(o.log, fmt.Sprintf("generation under %s: %s %v", m.id[:8], id[:8], parts))
		o.added(id, m.id, "assistant", false, parts)
	default: // an assistant text, once with the conversation's id as its id
		var id string
		if !o.usedConvID && o.seed%3 == 0 {
			id = queryRow[string](o.t, o.db, `SELECT convo.append_message($1, 'assistant', $2, p_message_id => $1)::text`,
				o.conv, textParts("said"))
			o.usedConvID = true
		} else {
			id = appendMsg(o.t, o.db, o.conv, "assistant", textParts("said"))
		}
		o.log = append(o.log, "append assistant text "+id[:8]+" under "+head[:8])
		o.added(id, head, "assistant", false, nil)
	}
}

// newOracleConv is seed's conversation for the oracle: a system message
// on every other seed, recorded as the tree's root.
func newOracleConv(t *testing.T, db *pgxpool.Pool, seed int) *oracleConv {
	t.Helper()
	o := &oracleConv{t: t, db: db, seed: seed, rng: rand.New(rand.NewSource(int64(seed))),
		msgs: map[string]*oMsg{}, keys: map[string]string{}}
	system := ""
	if seed%2 == 0 {
		system = "You buy things."
	}
	o.conv = createConversation(t, db, "owner-oracle", system)
	if h := o.head(); h != "" {
		o.added(h, "", "system", false, nil)
	}
	return o
}

// TestAttackRerunPlaceOracle: over random trees built by the API (appends,
// agent loops with results, regenerations, edits, head moves, answers of
// generations under any message; tools of each scope, rejected calls,
// replays, an unregistered tool; a message whose id is the conversation's,
// which the index's coalesce would confuse with the conversation as a fork
// point), every call's decision, fork point, reused effect and
// repeats_effect_id is the contract's: a re-run is a call of the same
// tool at the same fork point, decided execute, reuse or confirm, whose
// message is neither the call's own nor an ancestor; the repeated effect is
// the latest such call's by (decided_at, tool_call_id).
func TestAttackRerunPlaceOracle(t *testing.T) {
	db := newDB(t)
	for tool, scope := range oracleScopes {
		effRegisterPurchase(t, db, tool, scope, "1 hour")
	}
	registerTestTool(t, db, "look", false, `{"type": "object"}`)
	steps := 45
	for seed := 1; seed <= 30; seed++ {
		t.Run(fmt.Sprintf("seed%02d", seed), func(t *testing.T) {
			o := newOracleConv(t, db, seed)
			for i := 0; i < steps; i++ {
				o.step()
			}
			confirms := 0
			for _, c := range o.calls {
				if c.decision == "confirm" {
					confirms++
				}
			}
			t.Logf("seed %d: %d messages, %d calls recorded, %d confirms", seed, len(o.order), len(o.calls), confirms)
		})
	}
	requireEqual(t, "calls placed elsewhere than their messages", queryRow[int64](t, db, `
		SELECT count(*) FROM convo.tool_effect_calls l
		  JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
		 WHERE (l.branch_id, l.depth) IS DISTINCT FROM (m.branch_id, m.depth)`), 0)
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// placeSource writes, in src, a conversation with calls on three branches
// at one fork point (the conversation): u1 -> a1 [buy p1] -> r1 -> a2
// [buy p2, lookup p3] -> r2 on the first branch; a1 regenerated as a1b
// [buy q1] (a second branch); u1 edited as u1b -> b1 [buy e1] (a third).
// It returns the conversation and its document.
func placeSource(t testing.TB, src *pgxpool.Pool) (conv string, msgs map[string]string, doc string) {
	t.Helper()
	msgs = map[string]string{}
	conv = createConversation(t, src, "owner-1", "")
	msgs["u1"] = appendMsg(t, src, conv, "user", textParts("buy"))
	msgs["a1"] = appendMsg(t, src, conv, "assistant", effToolUses(effBuy("p1", "buy", 1)))
	msgs["r1"] = appendMsg(t, src, conv, "user", effToolResults("p1"))
	msgs["a2"] = appendMsg(t, src, conv, "assistant", effToolUses(effBuy("p2", "buy", 2),
		effCall{ID: "p3", Name: "lookup", Input: map[string]any{"order": 1}}))
	msgs["r2"] = appendMsg(t, src, conv, "tool", effToolResults("p2", "p3"))
	msgs["a1b"] = regenerateMsg(t, src, conv, msgs["a1"], effToolUses(effBuy("q1", "buy", 1)))
	msgs["u1b"] = editMsg(t, src, conv, msgs["u1"], textParts("buy again"))
	msgs["b1"] = appendMsg(t, src, conv, "assistant", effToolUses(effBuy("e1", "buy", 3)))
	requireEqual(t, "q1's decision", effLink(t, src, conv, "q1").Decision, "confirm")
	requireEqual(t, "e1's decision", effLink(t, src, conv, "e1").Decision, "confirm")
	return conv, msgs, exportAs(t, src, "", conv)
}

// callRow returns the document's tool_calls row of call id.
func callRow(t testing.TB, x map[string]any, id string) map[string]any {
	t.Helper()
	for _, r := range rows(x, "tool_calls") {
		if r["tool_call_id"] == id {
			return r
		}
	}
	t.Fatalf("no tool_calls row %s in the document", id)
	return nil
}

// TestAttackRerunPlaceRestore: restores of a document with calls on three
// branches. Without places (an older document), with the right place on
// one call only, or with only a right branch_id: restored, each call at its
// message, self_check clean, a repeat of the same document a no-op, and the
// restored ledger feeds the lookup (a call of a new branch confirms,
// naming the latest). With both null on a call (a distributed database's
// export of a call its upgrade could not place): restored as it is. Any
// other place (another real branch, the depth of another real message, one
// null of the two, not a uuid, not an integer, a right branch with a wrong
// depth on one call only) is refused with CV011 and writes nothing.
func TestAttackRerunPlaceRestore(t *testing.T) {
	src := newDB(t)
	exportTools(t, src)
	_, _, doc := placeSource(t, src)
	x := decodeExport(t, doc)
	branchOf := func(id string) any { return callRow(t, x, id)["branch_id"] }
	depthOf := func(id string) any { return callRow(t, x, id)["depth"] }

	strip := func(except ...string) func(x map[string]any) {
		return func(x map[string]any) {
			for _, r := range rows(x, "tool_calls") {
				keep := false
				for _, e := range except {
					keep = keep || r["tool_call_id"] == e
				}
				if !keep {
					delete(r, "branch_id")
					delete(r, "depth")
				}
			}
		}
	}
	good := []struct {
		name string
		edit func(x map[string]any)
	}{
		{"no places", strip()},
		{"a place on one call only", strip("p2")},
		{"a branch_id without depth on one call", func(x map[string]any) {
			strip("p2")(x)
			delete(callRow(t, x, "p2"), "depth")
		}},
		{"a depth without branch_id on one call", func(x map[string]any) {
			strip("q1")(x)
			delete(callRow(t, x, "q1"), "branch_id")
		}},
	}
	for _, c := range good {
		t.Run(c.name, func(t *testing.T) {
			dst := newDB(t)
			exportTools(t, dst)
			admin := loginAs(t, dst, "convo_admin")
			old := editExport(t, doc, c.edit)
			id, err := importAs(admin, "owner-1", "conversation", old)
			if err != nil {
				t.Fatalf("restoring: %v", err)
			}
			requireEqual(t, "restored calls placed elsewhere than their messages", misplacedCalls(t, dst, id), 0)
			requireEqual(t, "restored calls", queryRow[int64](t, dst,
				`SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1`, id), 5)
			requireEqual(t, "self_check failures", failingChecks(t, dst), "")
			before := fingerprint(t, dst)
			again, err := importAs(admin, "owner-1", "conversation", old)
			if err != nil || again != id {
				t.Fatalf("restoring the same document again: %s, %v", again, err)
			}
			requireFingerprint(t, dst, "the repeated restore", before)
			// The restored ledger feeds the lookup: a new question's call
			// repeats the latest call of the three other branches (e1).
			u := queryRow[string](t, dst, `SELECT parent_id::text FROM convo.messages
			                                 WHERE conversation_id = $1 AND id = (SELECT head_message_id FROM convo.conversations WHERE id = $1)`, id)
			editMsg(t, dst, id, u, textParts("buy a third time"))
			appendMsg(t, dst, id, "assistant", effToolUses(effBuy("n1", "buy", 1)))
			l := effLink(t, dst, id, "n1")
			requireEqual(t, "n1's decision", l.Decision, "confirm")
			requireEqual(t, "what n1 repeats", effRead(t, dst, id, l.EffectID).RepeatsEffectID, effLink(t, dst, id, "e1").EffectID)
			requireEqual(t, "self_check failures after the new call", failingChecks(t, dst), "")
		})
	}

	// Both null is no place: a distributed database exports so the calls
	// its upgrade could not place. Restored as they are (the document reads
	// back), self_check clean, and the lookup reads them as before.
	for _, c := range []struct {
		name     string
		unplaced int64
		edit     func(x map[string]any)
	}{
		{"both null", 1, func(x map[string]any) { callRow(t, x, "p1")["branch_id"], callRow(t, x, "p1")["depth"] = nil, nil }},
		{"both null on every call", 5, func(x map[string]any) {
			for _, r := range rows(x, "tool_calls") {
				r["branch_id"], r["depth"] = nil, nil
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := newDB(t)
			exportTools(t, dst)
			id, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", editExport(t, doc, c.edit))
			if err != nil {
				t.Fatalf("restoring: %v", err)
			}
			requireEqual(t, "restored calls without a place", queryRow[int64](t, dst,
				`SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1 AND branch_id IS NULL`, id), c.unplaced)
			requireEqual(t, "self_check failures", failingChecks(t, dst), "")
			u := queryRow[string](t, dst, `SELECT parent_id::text FROM convo.messages
			                                 WHERE conversation_id = $1 AND id = (SELECT head_message_id FROM convo.conversations WHERE id = $1)`, id)
			editMsg(t, dst, id, u, textParts("buy a third time"))
			appendMsg(t, dst, id, "assistant", effToolUses(effBuy("n1", "buy", 1)))
			l := effLink(t, dst, id, "n1")
			requireEqual(t, "n1's decision", l.Decision, "confirm")
			requireEqual(t, "what n1 repeats", effRead(t, dst, id, l.EffectID).RepeatsEffectID, effLink(t, dst, id, "e1").EffectID)
		})
	}

	bad := []struct {
		name string
		edit func(x map[string]any)
	}{
		{"another real branch", func(x map[string]any) { callRow(t, x, "p1")["branch_id"] = branchOf("q1") }},
		{"the depth of another real message", func(x map[string]any) { callRow(t, x, "p2")["depth"] = depthOf("p1") }},
		{"the place of another call", func(x map[string]any) {
			callRow(t, x, "e1")["branch_id"], callRow(t, x, "e1")["depth"] = branchOf("p2"), depthOf("p2")
		}},
		{"the message's own id as branch", func(x map[string]any) {
			callRow(t, x, "p2")["branch_id"] = callRow(t, x, "p2")["message_id"]
		}},
		{"a null branch_id", func(x map[string]any) { callRow(t, x, "p1")["branch_id"] = nil }},
		{"a null depth", func(x map[string]any) { callRow(t, x, "p1")["depth"] = nil }},
		{"a branch_id that is no uuid", func(x map[string]any) { callRow(t, x, "p1")["branch_id"] = "not-a-uuid" }},
		{"a branch_id that is a number", func(x map[string]any) { callRow(t, x, "p1")["branch_id"] = json.Number("7") }},
		{"a branch_id in capitals", func(x map[string]any) {
			callRow(t, x, "p1")["branch_id"] = strings.ToUpper(branchOf("p1").(string))
		}},
		{"a depth that is text", func(x map[string]any) { callRow(t, x, "p1")["depth"] = "one" }},
		{"a depth that is a numeral in a string", func(x map[string]any) { callRow(t, x, "p1")["depth"] = "1" }},
		{"a fractional depth", func(x map[string]any) { callRow(t, x, "p1")["depth"] = json.Number("1.5") }},
		{"a depth past int", func(x map[string]any) { callRow(t, x, "p1")["depth"] = json.Number("99999999999") }},
		{"a negative depth", func(x map[string]any) { callRow(t, x, "p1")["depth"] = json.Number("-1") }},
		{"a place on one call only, wrong", func(x map[string]any) {
			strip("p2")(x)
			callRow(t, x, "p2")["depth"] = json.Number("2")
		}},
		{"a wrong branch_id without depth", func(x map[string]any) {
			strip("p2")(x)
			delete(callRow(t, x, "p2"), "depth")
			callRow(t, x, "p2")["branch_id"] = branchOf("q1")
		}},
		{"a wrong depth without branch_id", func(x map[string]any) {
			strip("q1")(x)
			delete(callRow(t, x, "q1"), "branch_id")
			callRow(t, x, "q1")["depth"] = json.Number("3")
		}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			dst := newDB(t)
			exportTools(t, dst)
			admin := loginAs(t, dst, "convo_admin")
			forged := editExport(t, doc, c.edit)
			before := fingerprint(t, dst)
			_, err := importAs(admin, "owner-1", "conversation", forged)
			requireSQLState(t, err, "CV011")
			t.Logf("refused: %v", err)
			requireFingerprint(t, dst, "the refused restore", before)
		})
	}
}

// pgTime spells a time as export_conversation does (UTC, +00:00, no
// trailing zeros in the fraction).
func pgTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.999999-07:00")
}

// TestAttackRerunPlaceRestoredOutOfOrder: the lookup takes on each branch
// its deepest call as its latest ("a branch is written top down"), but a
// restore accepts a document in which a call was decided after a deeper
// call of its own branch (after its child message was even created): here
// p1 (depth 1) is decided after p2 (depth 3, same branch) and after q1
// (another branch). A call of a new branch then repeats q1, where the
// latest call off its path, by the contract's and the guide's "latest", is
// p1 (the lookup before 0048 named p1). Either the restore should refuse a
// call decided after a descendant message was created (a history the API
// could not have written), or the lookup should not rely on the order.
func TestAttackRerunPlaceRestoredOutOfOrder(t *testing.T) {
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := createConversation(t, src, "owner-1", "")
	u1 := appendMsg(t, src, conv, "user", textParts("buy"))
	a1 := appendMsg(t, src, conv, "assistant", effToolUses(effBuy("p1", "buy", 1)))
	appendMsg(t, src, conv, "user", effToolResults("p1"))
	appendMsg(t, src, conv, "assistant", effToolUses(effBuy("p2", "buy", 2)))
	appendMsg(t, src, conv, "user", effToolResults("p2"))
	regenerateMsg(t, src, conv, a1, effToolUses(effBuy("q1", "buy", 1)))
	doc := exportAs(t, src, "", conv)
	q1At := queryRow[time.Time](t, src, `SELECT decided_at FROM convo.tool_effect_calls WHERE conversation_id = $1 AND tool_call_id = 'q1'`, conv)
	forged := editExport(t, doc, func(x map[string]any) {
		p1 := callRow(t, x, "p1")
		p1["decided_at"] = pgTime(q1At.Add(time.Millisecond))
		// The document's calls in the export's order (decided_at): p1 last.
		var calls []any
		for _, r := range rows(x, "tool_calls") {
			if r["tool_call_id"] != "p1" {
				calls = append(calls, r)
			}
		}
		x["tool_calls"] = append(calls, p1)
	})
	id, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", forged)
	if err != nil {
		// A fix may refuse it: then it must be refused as the contract says.
		requireSQLState(t, err, "CV011")
		t.Logf("the restore refuses the out-of-order document: %v (%s)", err, pgError(t, err).Detail)
		return
	}
	t.Logf("restored a document whose call p1 (depth 1) was decided after p2 (depth 3, same branch) and q1; self_check: %q",
		failingChecks(t, dst))
	editMsg(t, dst, id, u1, textParts("buy again"))
	appendMsg(t, dst, id, "assistant", effToolUses(effBuy("n1", "buy", 1)))
	l := effLink(t, dst, id, "n1")
	requireEqual(t, "n1's decision", l.Decision, "confirm")
	got := effRead(t, dst, id, l.EffectID).RepeatsEffectID
	names := map[string]string{}
	for _, c := range []string{"p1", "p2", "q1"} {
		names[effLink(t, dst, id, c).EffectID] = c
	}
	if want := effLink(t, dst, id, "p1").EffectID; got != want {
		t.Errorf("n1 repeats %s's effect; the latest call off its path (by decided_at) is p1", names[got])
	}
}

// TestAttackRerunPlaceForgery: a call's place written by hand. Inserting a
// row placed elsewhere than its message (for a call of a tool registered
// after its message was written, so the row is otherwise one the API could
// have written), or moving a row's branch or depth, is refused (CV005) for
// the owner role (by SET ROLE and by SET SESSION AUTHORIZATION) and for a
// role granted ALL on the tables; the superuser's insert (in either
// replication role) goes in, and self_check reports the call as placed
// elsewhere than its message, and only that. Calling record_tool_call
// itself with a wrong place is refused too. A foreign trigger that moves
// each new call one message down (the superuser's) is reported by
// self_check, as is every call it moved, and the next call of the agent
// turn is indeed taken for a re-run of a call on its own path.
func TestAttackRerunPlaceForgery(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "user", textParts("buy"))
	a := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("f1", "buy", 1), effCall{ID: "g1", Name: "ghost", Input: map[string]any{}}))
	appendMsg(t, db, conv, "user", effToolResults("f1", "g1"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("f2", "buy", 2)))
	ab := regenerateMsg(t, db, conv, a, effToolUses(effBuy("f3", "buy", 3)))
	registerTestTool(t, db, "ghost", false, `{"type": "object"}`)
	requireEqual(t, "self_check failures before", failingChecks(t, db), "")
	var branch, otherBranch string
	var depth int32
	if err := db.QueryRow(context.Background(), `SELECT branch_id::text, depth FROM convo.messages WHERE conversation_id = $1 AND id = $2`,
		conv, a).Scan(&branch, &depth); err != nil {
		t.Fatal(err)
	}
	otherBranch = queryRow[string](t, db, `SELECT branch_id::text FROM convo.messages WHERE conversation_id = $1 AND id = $2`, conv, ab)
	grantee := createGrantedRole(t, db)
	ctx := context.Background()

	type attempt struct{ name, sql string }
	inserts := []attempt{
		{"insert one message down", fmt.Sprintf(`INSERT INTO convo.tool_effect_calls
			(conversation_id, tool_call_id, message_id, ordinal, decision, fork_point_id, tool_name, tool_version, branch_id, depth)
			VALUES ('%s', 'g1', '%s', 1, 'replay', NULL, 'ghost', 1, '%s', %d)`, conv, a, branch, depth+1)},
		{"insert on another branch", fmt.Sprintf(`INSERT INTO convo.tool_effect_calls
			(conversation_id, tool_call_id, message_id, ordinal, decision, fork_point_id, tool_name, tool_version, branch_id, depth)
			VALUES ('%s', 'g1', '%s', 1, 'replay', NULL, 'ghost', 1, '%s', %d)`, conv, a, otherBranch, depth)},
	}
	updates := []attempt{
		{"update depth", `UPDATE convo.tool_effect_calls SET depth = depth + 1 WHERE tool_call_id = 'f1'`},
		{"update branch", fmt.Sprintf(`UPDATE convo.tool_effect_calls SET branch_id = '%s' WHERE tool_call_id = 'f1'`, otherBranch)},
		{"record_tool_call with a wrong place", fmt.Sprintf(`SELECT convo_private.record_tool_call('%s', '%s', 1, 'g1', 'ghost', '{}', '%s', %d)`,
			conv, a, otherBranch, depth+5)},
	}
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		super := queryRowConn[bool](t, conn, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`)
		try := func(at attempt, check func(err error, tx pgx.Tx)) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			_, err = tx.Exec(ctx, at.sql)
			t.Logf("%s: %v", at.name, err)
			check(err, tx)
		}
		for _, at := range inserts {
			try(at, func(err error, tx pgx.Tx) {
				if !super {
					requireSQLState(t, err, "CV005")
					return
				}
				if err != nil {
					t.Fatalf("%s as a superuser: %v", at.name, err)
				}
				var failing []string
				// (The granted role's privileges are self_check's failure too.)
				rows, err := tx.Query(ctx, `SELECT check_name || ': ' || detail FROM convo.self_check() WHERE NOT ok AND check_name <> 'privileges'`)
				if err != nil {
					t.Fatal(err)
				}
				failing, err = pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatal(err)
				}
				if len(failing) != 1 || !strings.Contains(failing[0], "tool call g1: is placed on branch") {
					t.Errorf("%s: self_check reports %q, want the call placed elsewhere than its message", at.name, failing)
				}
			})
		}
		for _, at := range updates {
			try(at, func(err error, tx pgx.Tx) {
				if at.name == "record_tool_call with a wrong place" && !super {
					requireSQLStateIn(t, err, "CV005", "42501")
					return
				}
				if at.name == "record_tool_call with a wrong place" {
					// A superuser can do anything; self_check must see it.
					if err != nil {
						t.Fatalf("%s as a superuser: %v", at.name, err)
					}
					n := queryRowTx[int64](t, tx, `SELECT count(*) FROM convo.self_check() WHERE NOT ok AND detail LIKE '%tool call g1: is placed%'`)
					requireEqual(t, "self_check failures naming g1's place", n, 1)
					return
				}
				requireSQLState(t, err, "CV005")
			})
		}
	})

	// A foreign trigger moving each new call one message down.
	mustExec(t, db, `CREATE FUNCTION public.shift_depth() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN NEW.depth := NEW.depth + 10; RETURN NEW; END $$`)
	mustExec(t, db, `CREATE TRIGGER zz_shift BEFORE INSERT ON convo.tool_effect_calls FOR EACH ROW EXECUTE FUNCTION public.shift_depth()`)
	conv2 := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv2, "user", textParts("buy"))
	agentRound(t, db, conv2, "buy", "h1", 1)
	agentRound(t, db, conv2, "buy", "h2", 2)
	mustExec(t, db, `DROP TRIGGER zz_shift ON convo.tool_effect_calls`)
	mustExec(t, db, `DROP FUNCTION public.shift_depth()`)
	requireEqual(t, "h2's decision (h1, misplaced below the path, is taken for a call off it)", effLink(t, db, conv2, "h2").Decision, "confirm")
	mustExec(t, db, `CREATE FUNCTION public.shift_depth() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN NEW.depth := NEW.depth + 10; RETURN NEW; END $$`)
	mustExec(t, db, `CREATE TRIGGER zz_shift BEFORE INSERT ON convo.tool_effect_calls FOR EACH ROW EXECUTE FUNCTION public.shift_depth()`)
	failing := failingChecks(t, db)
	t.Logf("self_check with the foreign trigger:\n%s", failing)
	for _, want := range []string{"no_foreign_triggers: tool_effect_calls.zz_shift", "tool call h1: is placed on branch", "tool call h2: is placed on branch"} {
		if !strings.Contains(failing, want) {
			t.Errorf("self_check does not report %q", want)
		}
	}
}

// queryRowConn reads one value on a connection.
func queryRowConn[T any](t testing.TB, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// queryRowTx reads one value in a transaction.
func queryRowTx[T any](t testing.TB, tx pgx.Tx, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := tx.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// TestAttackRerunPlaceOtherBranchLength: rerun_candidate's comment says
// each branch with calls of the tool at the fork point is visited with
// "one descent each", its deepest call off the path being its latest.
// Here an agent turn of n rounds ran, then the question was edited and a
// new turn began at the same fork point: the old turn's n calls are all off
// the new path, on one branch. The lookup for the new turn's next call
// should read about as many ledger rows whatever n (one descent into the
// old branch); it is counted (index access only, as on a large table) at
// n = 40 and n = 160.
func TestAttackRerunPlaceOtherBranchLength(t *testing.T) {
	read := map[int]int64{}
	for _, n := range []int{40, 160} {
		db := newDB(t)
		effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
		conv := createConversation(t, db, "owner-1", "")
		question := appendMsg(t, db, conv, "user", textParts("go"))
		for i := 1; i <= n; i++ {
			agentRound(t, db, conv, "buy", fmt.Sprintf("old%d", i), 1+i%1000)
		}
		editMsg(t, db, conv, question, textParts("go again"))
		for i := 1; i <= 3; i++ {
			agentRound(t, db, conv, "buy", fmt.Sprintf("new%d", i), 1+i%1000)
		}
		requireEqual(t, "new3's decision", effLink(t, db, conv, "new3").Decision, "confirm")
		requireEqual(t, "what new3 repeats (the old turn's last call)",
			effRead(t, db, conv, effLink(t, db, conv, "new3").EffectID).RepeatsEffectID, effLink(t, db, conv, fmt.Sprintf("old%d", n)).EffectID)
		read[n] = lookupRowsRead(t, db, conv, "buy")
	}
	t.Logf("ledger rows the lookup read for the new turn's next call: %d with an old turn of 40 calls on the other branch, %d with 160",
		read[40], read[160])
	if read[160] > read[40]+4 {
		t.Errorf("the lookup read %d ledger rows with 160 calls on the other branch, %d with 40: it reads every call of that branch, not one descent",
			read[160], read[40])
	}
}
