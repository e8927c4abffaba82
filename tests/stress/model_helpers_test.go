package stress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The verification half of TestModel (model_test.go): one batch of reads
// per conversation, compared with the model.

// mDecode decodes JSON keeping numbers as written (jsonb keeps 500.0 apart
// from 500 in its text), for comparing parts by value, not by key order or
// spacing.
func mDecode(s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		panic(fmt.Sprintf("decoding %q: %v", s, err))
	}
	return v
}

func mJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(bytes.TrimSpace(b))
}

type mPathRow struct {
	id, parent, role, reason, parts string
	depth, index, count             int32
	at                              time.Time
}

type mHistRow struct {
	seq            int64
	head, prev, by string
	reason         string
	at             time.Time
	rn, n          int64
	movedByIsNull  bool
}

type mAltRow struct {
	id, reason, leaf string
	at               time.Time
	onPath           bool
}

type mOrphanRow struct {
	id, tool, ref, currency string
	amount                  int64
	at                      time.Time
	calls                   []string
}

type mEffectRow struct {
	id, tool, key, state, ref, compBy, currency string
	amount                                      int64
}

type mCallRow struct {
	call, effect, decision, state, key, ref, errCode string
	http                                             int32
}

// verify reads conversation c back and compares it with the model; full
// compares everything, else what the step may have changed and a sample.
func (w *mWorker) verify(c *mConv, full bool) error {
	path := c.path()
	onPath := map[*mMsg]bool{}
	for _, m := range path {
		onPath[m] = true
	}

	var alts []*mMsg
	if full {
		alts = path
	} else {
		// The message the step touched (an edit's original and its new
		// sibling are one group), and now and then one on the path.
		for _, m := range w.focus {
			if m.conv == c {
				alts = append(alts, m)
				break
			}
		}
		if len(path) > 0 && (len(alts) == 0 || w.chance(25)) {
			alts = append(alts, pick(w, path))
		}
	}
	var calls []*mCall
	if full {
		calls = c.calls
	} else {
		seen := map[*mCall]bool{}
		for _, call := range w.checkCalls {
			if call.msg.conv == c && !seen[call] {
				seen[call] = true
				calls = append(calls, call)
			}
		}
		for i := 0; i < 2 && len(c.calls) > 0; i++ {
			if call := pick(w, c.calls); !seen[call] {
				seen[call] = true
				calls = append(calls, call)
			}
		}
		// In creation order, so that a new effect is bound by the call
		// that made it before a later call reuses it.
		sort.Slice(calls, func(i, j int) bool { return slices.Index(c.calls, calls[i]) < slices.Index(c.calls, calls[j]) })
	}
	var registered, unregistered []string
	for _, call := range calls {
		if call.decision == "" {
			unregistered = append(unregistered, call.id)
		} else {
			registered = append(registered, call.id)
		}
	}
	histFrom := int64(c.histKnown)
	if full {
		histFrom = 0
	}

	var (
		pathRows   []mPathRow
		head       string
		nMsg, nEff int64
		nGen       int64
		histRows   []mHistRow
		altRows    = make([][]mAltRow, len(alts))
		orphans    []mOrphanRow
		effects    []mEffectRow
		gens       = map[string]string{}
		callRows   []mCallRow
		nStale     int64
		nStaleGen  int64
	)
	b := &pgx.Batch{}
	b.Queue(`SELECT message_id::text, coalesce(parent_id::text, ''), role, depth, sibling_index, sibling_count,
		        coalesce(branch_reason, ''), parts::text, created_at FROM convo.path($1)`, c.id).Query(func(rows pgx.Rows) error {
		var err error
		pathRows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mPathRow, error) {
			var p mPathRow
			err := r.Scan(&p.id, &p.parent, &p.role, &p.depth, &p.index, &p.count, &p.reason, &p.parts, &p.at)
			return p, err
		})
		return err
	})
	b.Queue(`SELECT coalesce(c.head_message_id::text, ''),
		        (SELECT count(*) FROM convo.messages m WHERE m.conversation_id = c.id),
		        (SELECT count(*) FROM convo.tool_effects e WHERE e.conversation_id = c.id),
		        (SELECT count(*) FROM convo.generations g WHERE g.conversation_id = c.id)
		   FROM convo.conversations c WHERE c.id = $1`, c.id).QueryRow(func(r pgx.Row) error {
		return r.Scan(&head, &nMsg, &nEff, &nGen)
	})
	b.Queue(`SELECT seq, head_message_id::text, coalesce(previous_head_id::text, ''), moved_at, coalesce(moved_by, ''),
		        moved_by IS NULL, reason, rn, n
		   FROM (SELECT h.*, row_number() OVER (ORDER BY h.seq) AS rn, count(*) OVER () AS n FROM convo.head_history($1) h) x
		  WHERE rn > $2 OR rn = n ORDER BY rn`, c.id, histFrom).Query(func(rows pgx.Rows) error {
		var err error
		histRows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mHistRow, error) {
			var h mHistRow
			err := r.Scan(&h.seq, &h.head, &h.prev, &h.at, &h.by, &h.movedByIsNull, &h.reason, &h.rn, &h.n)
			return h, err
		})
		return err
	})
	for i, m := range alts {
		b.Queue(`SELECT message_id::text, coalesce(branch_reason, ''), created_at, on_head_path, coalesce(latest_leaf_id::text, '')
			   FROM convo.alternatives($1, $2)`, c.id, m.id).Query(func(rows pgx.Rows) error {
			var err error
			altRows[i], err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mAltRow, error) {
				var a mAltRow
				err := r.Scan(&a.id, &a.reason, &a.at, &a.onPath, &a.leaf)
				return a, err
			})
			return err
		})
	}
	b.Queue(`SELECT id::text, tool_name, idempotency_key, state, coalesce(external_ref, ''), coalesce(compensated_by, ''),
		        coalesce(amount_minor, -1), coalesce(currency, '')
		   FROM convo.tool_effects WHERE conversation_id = $1`, c.id).Query(func(rows pgx.Rows) error {
		var err error
		effects, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mEffectRow, error) {
			var e mEffectRow
			err := r.Scan(&e.id, &e.tool, &e.key, &e.state, &e.ref, &e.compBy, &e.amount, &e.currency)
			return e, err
		})
		return err
	})
	b.Queue(`SELECT id::text, state FROM convo.generations WHERE conversation_id = $1`, c.id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, state string
			if err := rows.Scan(&id, &state); err != nil {
				return err
			}
			gens[id] = state
		}
		return rows.Err()
	})
	if len(registered) > 0 {
		b.Queue(`SELECT c.id, coalesce(d.effect_id::text, ''), d.decision, coalesce(d.state, ''), coalesce(d.idempotency_key, ''),
			        coalesce(d.external_ref, ''), coalesce(d.http_status, 0), coalesce(d.error_code, '')
			   FROM unnest($2::text[]) WITH ORDINALITY AS c (id, n)
			  CROSS JOIN LATERAL convo.effect_for_call($1, c.id) d
			  ORDER BY c.n`, c.id, registered).Query(func(rows pgx.Rows) error {
			var err error
			callRows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mCallRow, error) {
				var d mCallRow
				err := r.Scan(&d.call, &d.effect, &d.decision, &d.state, &d.key, &d.ref, &d.http, &d.errCode)
				return d, err
			})
			return err
		})
	}
	// The views last, as the application reads them: as convo_app with the
	// conversation's owner set (both local to the batch's implicit
	// transaction). A superuser sees every owner's rows, and the views
	// compute them all before the conversation's are picked out: a read
	// that grows with everything the run wrote so far.
	b.Queue(`SELECT set_config('convo.owner_id', $1, true), set_config('role', 'convo_app', true)`, c.owner)
	b.Queue(`SELECT effect_id::text, tool_name, external_ref, coalesce(amount_minor, -1), coalesce(currency, ''), settled_at, tool_call_ids
		   FROM convo.orphaned_applied_effects WHERE conversation_id = $1`, c.id).Query(func(rows pgx.Rows) error {
		var err error
		orphans, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (mOrphanRow, error) {
			var o mOrphanRow
			err := r.Scan(&o.id, &o.tool, &o.ref, &o.amount, &o.currency, &o.at, &o.calls)
			return o, err
		})
		return err
	})
	if full {
		b.Queue(`SELECT (SELECT count(*) FROM convo.stale_pending_effects WHERE conversation_id = $1),
			        (SELECT count(*) FROM convo.stale_generations WHERE conversation_id = $1)`, c.id).QueryRow(func(r pgx.Row) error {
			return r.Scan(&nStale, &nStaleGen)
		})
	}
	b.Queue(`RESET ROLE`)
	if err := w.db.SendBatch(w.ctx, b).Close(); err != nil {
		return fmt.Errorf("reading conversation %s back: %v", c.id, err)
	}
	for _, id := range unregistered {
		if err := w.exec("CV007", `SELECT * FROM convo.effect_for_call($1, $2)`, c.id, id); err != nil {
			return fmt.Errorf("effect_for_call(%s), a call of the unregistered tool %s: %v", id, mToolGhost, err)
		}
	}

	// The head and the row counts.
	if want := mIDOf(c.head); head != strings.Replace(want, "none", "", 1) {
		return fmt.Errorf("conversation %s: head %q, the model's %q", c.id, head, want)
	}
	if nMsg != int64(len(c.msgs)) || nEff != int64(len(c.effects)) || nGen != int64(len(c.gens)) {
		return fmt.Errorf("conversation %s: %d messages, %d effects, %d generations; the model has %d, %d, %d",
			c.id, nMsg, nEff, nGen, len(c.msgs), len(c.effects), len(c.gens))
	}
	if err := w.comparePath(c, path, pathRows); err != nil {
		return err
	}
	if err := w.compareHistory(c, histFrom, histRows); err != nil {
		return err
	}
	if err := w.compareEffects(c, calls, callRows, effects); err != nil {
		return err
	}
	if err := w.compareOrphans(c, onPath, orphans); err != nil {
		return err
	}
	for i, m := range alts {
		if err := w.compareAlternatives(c, m, onPath, altRows[i]); err != nil {
			return err
		}
	}
	for _, g := range c.gens {
		if gens[g.id] != g.state {
			return fmt.Errorf("generation %s: state %q, the model's %q", g.id, gens[g.id], g.state)
		}
	}
	if nStale != 0 || nStaleGen != 0 {
		return fmt.Errorf("conversation %s: %d stale pending effects and %d stale generations; every deadline is an hour away", c.id, nStale, nStaleGen)
	}
	return nil
}

// sameTime records a timestamp the first time it is read and compares it
// afterwards: ids and times never change, erasure included.
func sameTime(known *time.Time, got time.Time, what string) error {
	if known.IsZero() {
		*known = got
		return nil
	}
	if !known.Equal(got) {
		return fmt.Errorf("%s: %v, earlier %v", what, got, *known)
	}
	return nil
}

func (w *mWorker) comparePath(c *mConv, path []*mMsg, rows []mPathRow) error {
	describe := func() string {
		var g, m []string
		for _, r := range rows {
			g = append(g, r.id)
		}
		for _, x := range path {
			m = append(m, x.id)
		}
		return fmt.Sprintf("\n path()      %v\n the model's %v", g, m)
	}
	if len(rows) != len(path) {
		return fmt.Errorf("conversation %s: path has %d messages, the model's %d%s", c.id, len(rows), len(path), describe())
	}
	for i, m := range path {
		r := rows[i]
		want := mPathRow{id: m.id, parent: strings.Replace(mIDOf(m.parent), "none", "", 1), role: m.role, reason: m.branchReason,
			depth: int32(i), index: int32(m.sibIndex), count: int32(len(c.siblings(m)))}
		got := r
		got.parts, got.at = "", time.Time{}
		if got != want {
			return fmt.Errorf("conversation %s: path[%d] is\n %+v\nthe model's\n %+v%s", c.id, i, got, want, describe())
		}
		if err := sameTime(&m.createdAt, r.at, "created_at of "+m.id); err != nil {
			return err
		}
		if m.parent != nil && !m.parent.createdAt.IsZero() && !r.at.After(m.parent.createdAt) {
			return fmt.Errorf("message %s was created at %v, not after its parent (%v)", m.id, r.at, m.parent.createdAt)
		}
		if err := checkParts(m, r.parts); err != nil {
			return fmt.Errorf("conversation %s: path[%d] (%s): %v", c.id, i, m.id, err)
		}
	}
	return nil
}

// checkParts compares a message's stored parts with what was sent, or,
// once erased, with what erasure leaves: each part keeps its type and ids
// and says "erased": true, and none of the content is left.
func checkParts(m *mMsg, got string) error {
	if !m.erased {
		if !reflect.DeepEqual(mDecode(got), m.want) {
			return fmt.Errorf("parts %s, sent %s", got, m.partsJSON)
		}
		return nil
	}
	parts, ok := mDecode(got).([]any)
	if !ok || len(parts) != len(m.parts) {
		return fmt.Errorf("erased parts %s, want %d parts", got, len(m.parts))
	}
	for i, raw := range parts {
		p, _ := raw.(map[string]any)
		want := m.parts[i]
		bad := p == nil || p["type"] != want.typ || p["erased"] != true || strings.Contains(mJSON(p), m.marker)
		switch want.typ {
		case "text":
			bad = bad || p["text"] == want.text
		case "attachment":
			bad = bad || p["uri"] == want.uri
		case "tool_use":
			bad = bad || p["id"] != want.callID || reflect.DeepEqual(p["input"], mDecode(want.input))
		case "tool_result":
			bad = bad || p["tool_use_id"] != want.useID || reflect.DeepEqual(p["content"], mDecode(want.content))
		}
		if bad {
			return fmt.Errorf("erased part %d is %s; sent %s: want its type and ids, \"erased\": true and no content",
				i, mJSON(p), m.partsJSON)
		}
	}
	return nil
}

func (w *mWorker) compareHistory(c *mConv, from int64, rows []mHistRow) error {
	n := int64(0)
	if len(rows) > 0 {
		n = rows[0].n
	}
	if n != int64(len(c.moves)) {
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("#%d %s->%s %s", r.rn, r.prev, r.head, r.reason))
		}
		var want []string
		for i, m := range c.moves[min(int(from), len(c.moves)):] {
			want = append(want, fmt.Sprintf("#%d %s->%s %s", int(from)+i+1, mIDOf(m.prev), m.head.id, m.reason))
		}
		return fmt.Errorf("conversation %s: head_history has %d moves, the model %d\n rows from #%d: %v\n the model's:   %v",
			c.id, n, len(c.moves), from+1, got, want)
	}
	for _, r := range rows {
		i := int(r.rn - 1)
		m := c.moves[i]
		if r.head != m.head.id || r.prev != strings.Replace(mIDOf(m.prev), "none", "", 1) || r.reason != m.reason ||
			r.by != m.movedBy || r.movedByIsNull != (m.movedBy == "") {
			return fmt.Errorf("conversation %s: head_history[%d] is %s -> %s, %q by %q; the model's %s -> %s, %q by %q",
				c.id, i, r.prev, r.head, r.reason, r.by, mIDOf(m.prev), m.head.id, m.reason, m.movedBy)
		}
		if m.seq != 0 && m.seq != r.seq {
			return fmt.Errorf("conversation %s: head_history[%d] has seq %d, earlier %d", c.id, i, r.seq, m.seq)
		}
		if i > 0 && c.moves[i-1].seq != 0 && r.seq <= c.moves[i-1].seq {
			return fmt.Errorf("conversation %s: head_history[%d] has seq %d, not after %d", c.id, i, r.seq, c.moves[i-1].seq)
		}
		if i > 0 && !c.moves[i-1].at.IsZero() && r.at.Before(c.moves[i-1].at) {
			return fmt.Errorf("conversation %s: head_history[%d] moved at %v, before the move before it (%v)", c.id, i, r.at, c.moves[i-1].at)
		}
		m.seq = r.seq
		if err := sameTime(&m.at, r.at, fmt.Sprintf("moved_at of head_history[%d]", i)); err != nil {
			return err
		}
	}
	c.histKnown = len(c.moves)
	return nil
}

// compareEffects binds the ids and keys of new effects from effect_for_call
// of the calls that made them, then compares every effect's row and every
// checked call's answer.
func (w *mWorker) compareEffects(c *mConv, calls []*mCall, callRows []mCallRow, rows []mEffectRow) error {
	var reg []*mCall
	for _, call := range calls {
		if call.decision != "" {
			reg = append(reg, call)
		}
	}
	if len(callRows) != len(reg) {
		return fmt.Errorf("conversation %s: effect_for_call answered %d rows for %d calls", c.id, len(callRows), len(reg))
	}
	for i, call := range reg {
		r, e := callRows[i], call.effect
		if e == nil || e.id != "" {
			continue
		}
		if r.effect == "" || w.effectIDs[r.effect] != nil {
			return fmt.Errorf("effect_for_call(%s), a %s: effect %q, want a new effect", call.id, call.decision, r.effect)
		}
		if len(r.key) < 8 || len(r.key) > 255 || w.keys[r.key] != nil {
			return fmt.Errorf("effect_for_call(%s), a %s: key %q, want a new key of 8 to 255 characters (earlier with it: %v)",
				call.id, call.decision, r.key, w.keys[r.key] != nil)
		}
		e.id, e.key = r.effect, r.key
		w.effectIDs[e.id], w.keys[e.key] = e, e
	}

	byID := map[string]mEffectRow{}
	for _, r := range rows {
		byID[r.id] = r
	}
	for _, e := range c.effects {
		if e.id == "" {
			return fmt.Errorf("conversation %s: an effect of call %s was never seen by effect_for_call", c.id, e.calls[0].id)
		}
		r, ok := byID[e.id]
		if !ok {
			return fmt.Errorf("conversation %s: effect %s is not in tool_effects", c.id, e.id)
		}
		if e.newKeyDue {
			// A confirmed re-run runs under a key of its own that names
			// the re-run and the effect it repeats.
			names := false
			for _, x := range e.candidates {
				names = names || strings.Contains(r.key, x.id)
			}
			if r.key == e.key || w.keys[r.key] != nil || !strings.Contains(r.key, e.id) || !names || len(r.key) > 255 {
				return fmt.Errorf("effect %s, confirmed: key %q (before: %q); want a new key naming %s and one of the effects it repeats",
					e.id, r.key, e.key, e.id)
			}
			e.key, e.newKeyDue = r.key, false
			w.keys[e.key] = e
		}
		amount := int64(-1)
		if e.hasAmount {
			amount = e.amount
		}
		want := mEffectRow{id: e.id, tool: e.tool, key: e.key, state: e.state, ref: e.ref, compBy: e.compBy, amount: amount, currency: e.currency}
		if r != want {
			return fmt.Errorf("conversation %s: tool_effects row\n %+v\nthe model's\n %+v", c.id, r, want)
		}
	}

	for i, call := range reg {
		r := callRows[i]
		want := mCallRow{call: call.id, decision: call.decision}
		if e := call.effect; e != nil {
			want.effect, want.state, want.key, want.ref, want.http, want.errCode = e.id, e.state, e.key, e.ref, e.http, e.errCode
		}
		if r != want {
			return fmt.Errorf("conversation %s: effect_for_call(%s) (message %s, fork point %s)\n %+v\nthe model's\n %+v",
				c.id, call.id, call.msg.id, call.fork, r, want)
		}
	}
	return nil
}

func (w *mWorker) compareOrphans(c *mConv, onPath map[*mMsg]bool, rows []mOrphanRow) error {
	want := map[string]*mEffect{}
	for _, e := range c.effects {
		if e.state != "applied" {
			continue
		}
		seen := false
		for _, call := range e.calls {
			seen = seen || onPath[call.msg]
		}
		if !seen {
			want[e.id] = e
		}
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.id)
	}
	if len(rows) != len(want) {
		var ids []string
		for id := range want {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		sort.Strings(got)
		return fmt.Errorf("conversation %s: orphaned_applied_effects %v, the model's %v", c.id, got, ids)
	}
	for _, r := range rows {
		e := want[r.id]
		if e == nil {
			return fmt.Errorf("conversation %s: orphaned_applied_effects lists %s, the model does not (it lists %d)", c.id, r.id, len(want))
		}
		var callIDs []string
		for _, call := range e.calls {
			callIDs = append(callIDs, call.id)
		}
		gotCalls := slices.Clone(r.calls)
		sort.Strings(callIDs)
		sort.Strings(gotCalls)
		amount := int64(-1)
		if e.hasAmount {
			amount = e.amount
		}
		if r.tool != e.tool || r.ref != e.ref || r.amount != amount || r.currency != e.currency || !slices.Equal(gotCalls, callIDs) {
			return fmt.Errorf("conversation %s: orphaned effect %s: %s %s %d %s calls %v; the model's %s %s %d %s calls %v",
				c.id, e.id, r.tool, r.ref, r.amount, r.currency, gotCalls, e.tool, e.ref, amount, e.currency, callIDs)
		}
		if err := sameTime(&e.settledAt, r.at, "settled_at of "+e.id); err != nil {
			return err
		}
		w.count("orphaned:seen")
	}
	return nil
}

func (w *mWorker) compareAlternatives(c *mConv, m *mMsg, onPath map[*mMsg]bool, rows []mAltRow) error {
	sibs := c.siblings(m)
	if len(rows) != len(sibs) {
		return fmt.Errorf("conversation %s: alternatives(%s) has %d rows, the model %d siblings", c.id, m.id, len(rows), len(sibs))
	}
	for i, s := range sibs {
		r := rows[i]
		want := mAltRow{id: s.id, reason: s.branchReason, onPath: onPath[s], leaf: latestLeaf(s).id}
		got := r
		got.at = time.Time{}
		if got != want {
			return fmt.Errorf("conversation %s: alternatives(%s)[%d] is %+v, the model's %+v", c.id, m.id, i, got, want)
		}
		if err := sameTime(&s.createdAt, r.at, "created_at of "+s.id); err != nil {
			return err
		}
	}
	return nil
}
