package stress

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestModel is a model-based test: random sequences of
// operations run against the database and against an in-memory model, in Go,
// of what the API promises (docs/api.md, and docs/guide.md where the
// reference leaves a question open). Several conversations (with
// and without a system prompt) live side by side; each retires after a
// while and a new one takes its place. After every step the conversation
// the step named (and any other it named) is read back in one batch and
// compared with the model:
//   - the path: ids, parents, roles, depth, sibling_index, sibling_count,
//     branch_reason, created_at and the parts (as sent, or, once erased,
//     their type and ids with "erased": true and no content left);
//   - the head, and the counts of messages, effects and generations;
//   - head_history: every move the model expects, with its previous and
//     next head, reason and moved_by (the rows the step added, the last
//     one and the count; all of them in the full comparisons), seq and
//     moved_at increasing;
//   - alternatives of the message the step touched, or of one on the path:
//     ids, branch_reason, created_at, on_head_path, latest_leaf_id;
//   - every effect's tool_effects row (tool, idempotency_key, state,
//     external_ref, compensated_by, amount_minor, currency);
//   - orphaned_applied_effects: effect ids, tool, reference, amount,
//     currency, settled_at and the linked tool calls;
//   - the generations' states;
//   - effect_for_call (decision, effect, state, key, reference, status,
//     error code) for the calls the step made and the calls of every
//     effect it tried to change, plus two random calls: the other calls'
//     answers follow from the tool_effects rows compared above.
//
// Every 250 steps, at the end and when a conversation retires, every
// conversation is compared in full: every head move again, effect_for_call
// for every call (CV007 for the calls of the unregistered tool), the
// alternatives of every message on the path, and stale_pending_effects and
// stale_generations, which must be empty: every tool's deadline is an hour
// and a run takes about a minute, so "stale" is not time-dependent here
// (which effects go stale, and when, is left to effects_state_test.go and
// time_test.go, which control the clock).
//
// The model decides every expected result by itself: decisions, which
// calls share an effect, states, branch reasons, sibling positions, head
// moves, no-ops and errors (a refused call must change nothing, which the
// comparison after it checks). Only generated ids, keys and timestamps are
// read back, once; from then on they must not change, erasure included.
// Ids the caller may choose are drawn from the seeded generator, so a
// replay makes the same ones.
//
// PGCONVO_MODEL_SEED (or -model.seed) sets the seed, PGCONVO_MODEL_OPS (or
// -model.ops) the number of operations (default 10000, the fewest in which
// every outcome of modelRequiredOutcomes must be reached: the rarest, a
// create retried with other arguments, came 18 to 32 times in runs of
// 20000; 2000 with -short), PGCONVO_MODEL_WORKERS the number of workers (default 3: each runs its own
// conversations on its own pool, so a worker's run depends only on the seed
// and its number). PGCONVO_MODEL_STRICT adds the probes of
// modelStrictProbes that are off by default.
func TestModel(t *testing.T) {
	t.Parallel()
	s := readModelSettings(t)
	var strict []string
	for _, p := range modelStrictProbes {
		if s.strict[p] {
			strict = append(strict, p)
		}
	}
	t.Logf("TestModel seed %d, %d operations, %d workers, strict probes %v (replay: PGCONVO_MODEL_SEED=%d PGCONVO_MODEL_OPS=%d go test ./tests -run TestModel)",
		s.seed, s.ops, s.workers, strict, s.seed, s.ops)
	db := pgtest.NewDB(t)
	modelRegisterTools(t, db)
	start := time.Now()

	workers := make([]*mWorker, s.workers)
	errs := make([]error, s.workers)
	var wg sync.WaitGroup
	for i := range workers {
		ops := s.ops / s.workers
		if i == 0 {
			ops += s.ops % s.workers
		}
		w := &mWorker{
			s: s, idx: i, ops: ops, ctx: context.Background(),
			rng:       rand.New(rand.NewPCG(s.seed, uint64(i)+1)),
			db:        pgtest.NewPool(t, db.Config().ConnString(), pgx.QueryExecModeCacheStatement),
			stats:     map[string]int{},
			effectIDs: map[string]*mEffect{},
			keys:      map[string]*mEffect{},
			msgIDs:    map[string]*mMsg{},
		}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run()
		}()
	}
	wg.Wait()

	total := map[string]int{}
	for i, w := range workers {
		if errs[i] != nil {
			t.Errorf("%v", errs[i])
		}
		for k, v := range w.stats {
			total[k] += v
		}
	}
	keys := make([]string, 0, len(total))
	for k := range total {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, total[k])
	}
	t.Logf("TestModel: %d operations in %v;%s", s.ops, time.Since(start).Round(time.Millisecond), b.String())
	if t.Failed() || s.ops < 10000 {
		return
	}
	// A generator that drifted would make the comparisons prove little:
	// every kind of outcome must have happened in a default-sized run.
	for _, k := range modelRequiredOutcomes {
		if total[k] == 0 {
			t.Errorf("in %d operations the model never saw %q: the generator no longer reaches it", s.ops, k)
		}
	}
}

// modelRequiredOutcomes are the outcomes a run of 10000 operations or more
// must have reached (keys of mWorker.stats).
var modelRequiredOutcomes = []string{
	"decision:execute", "decision:reuse", "decision:confirm", "decision:rejected", "decision:replay", "decision:unregistered",
	"scope:tool_call:confirm", "scope:conversation_args:reuse", "scope:conversation_args:confirm",
	"scope:fork_args:reuse", "scope:fork_args:confirm", "fork:conversation", "fork:message",
	"effect:applied", "effect:failed", "effect:compensated", "effect:confirmed", "effect:declined",
	"effect:repeat", "effect:CV006", "effect:CV003", "effect:CV002", "effect:CV011", "orphaned:seen",
	"gen:completed:head_follows", "gen:completed:head_stays", "gen:completed:away_and_back", "gen:failed", "gen:cancelled",
	"gen:repeat", "gen:CV006", "gen:begin_retry", "gen:CV009",
	"append:ok", "append:CV001", "append:branch", "append:root", "retry:append", "retry:edit", "retry:regenerate", "retry:CV009",
	"edit:ok", "edit:off_path", "edit:root", "edit:CV001", "edit:CV004", "regenerate:ok", "regenerate:off_path", "regenerate:CV004",
	"move:ok", "move:noop", "move:CV001", "move:CV003", "move:CV002", "move:custom_reason",
	"parts:CV004", "parts:CV008_duplicate", "parts:CV008_result", "call:CV003", "call:CV002",
	"erase:ok", "erase:repeat", "erase:then_more", "create:retry", "create:CV009",
}

// modelStrictProbes are operations that probe the contract's wording more
// strictly. "json" and "settle" run by default (the database agreed once
// they were found: complete_generation and fail_generation compare parts
// and errors as text, and settling a rejected or declined effect, which no
// settlement produced, is CV006); PGCONVO_MODEL_STRICT (a comma-separated
// list of names, or 1 for all) adds the rest:
//
//   - "json": complete_generation repeated with parts whose jsonb text
//     differs only in 5 versus 5.0, and fail_generation repeated with
//     p_error {"retry_after": 5.0} after {"retry_after": 5}: different
//     requests by the contract's canonical form, CV006.
//   - "settle": settle_effect(failed) with exactly the values of a
//     rejection (422, invalid_arguments) or a decline (no status,
//     declined): no repeat of a settlement, so CV006.
//   - "moved": complete_generation after the head moved away and back. The
//     contract moves the head "only if the head has not moved since
//     begin_generation"; the README decides that a head moved away and back
//     counts as unmoved, and the default model follows the README, so this
//     probe fails by design.
var modelStrictProbes = []string{"json", "settle", "moved"}

var (
	modelSeedFlag = flag.String("model.seed", "", "TestModel's seed (default $PGCONVO_MODEL_SEED, else random)")
	modelOpsFlag  = flag.Int("model.ops", 0, "TestModel's number of operations (default $PGCONVO_MODEL_OPS, else 10000)")
)

// modelSettings are TestModel's knobs.
type modelSettings struct {
	seed    uint64
	ops     int
	workers int
	strict  map[string]bool // the probes of modelStrictProbes to run
}

func readModelSettings(t *testing.T) modelSettings {
	t.Helper()
	s := modelSettings{ops: 10000, workers: 3, seed: rand.Uint64()}
	if testing.Short() {
		s.ops = 2000
	}
	seed := *modelSeedFlag
	if seed == "" {
		seed = os.Getenv("PGCONVO_MODEL_SEED")
	}
	if seed != "" {
		n, err := strconv.ParseUint(seed, 10, 64)
		if err != nil {
			t.Fatalf("PGCONVO_MODEL_SEED %q: %v", seed, err)
		}
		s.seed = n
	}
	s.ops = pgtest.EnvCount(t, "PGCONVO_MODEL_OPS", s.ops)
	if *modelOpsFlag > 0 {
		s.ops = *modelOpsFlag
	}
	s.workers = pgtest.EnvCount(t, "PGCONVO_MODEL_WORKERS", s.workers)
	s.strict = map[string]bool{}
	s.strict["json"], s.strict["settle"] = true, true // fixed: see modelStrictProbes
	for _, probe := range strings.Split(os.Getenv("PGCONVO_MODEL_STRICT"), ",") {
		switch {
		case probe == "1":
			for _, p := range modelStrictProbes {
				s.strict[p] = true
			}
		case slices.Contains(modelStrictProbes, probe):
			s.strict[probe] = true
		case probe != "" && probe != "0":
			t.Fatalf("PGCONVO_MODEL_STRICT: unknown probe %q (known: 1 for all, or %v)", probe, modelStrictProbes)
		}
	}
	return s
}

// The tools of the model: one effectful tool per idempotency scope, all
// with pgtest.EffPurchaseSchema (amount_minor 1 to 100000, a currency of three
// capitals, nothing else) and a deadline of an hour; one tool without
// effects; and one name that is never registered.
const (
	mToolCall   = "mdl_buy_call"
	mToolConv   = "mdl_buy_conv"
	mToolFork   = "mdl_buy_fork"
	mToolLookup = "mdl_lookup"
	mToolGhost  = "mdl_ghost"
)

var mToolScope = map[string]string{mToolCall: "tool_call", mToolConv: "conversation_args", mToolFork: "fork_args"}

func modelRegisterTools(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	for _, name := range []string{mToolCall, mToolConv, mToolFork} {
		pgtest.EffRegisterPurchase(t, db, name, mToolScope[name], "1 hour")
	}
	pgtest.MustExec(t, db, `SELECT convo.register_tool($1, false, '{"type": "object"}')`, mToolLookup)
}

// ---------------------------------------------------------------------------
// The model.

// mConv is one conversation as the contract says it must be.
type mConv struct {
	id, owner, prompt, metadata, marker string
	msgs                                []*mMsg // creation order
	byID                                map[string]*mMsg
	roots                               []*mMsg
	head                                *mMsg
	moves                               []*mMove
	calls                               []*mCall // creation order
	callByID                            map[string]*mCall
	effects                             []*mEffect
	byScope                             map[string]*mEffect // scope key (the model's own) -> effect
	gens                                []*mGen
	ops, life                           int
	erasures                            int
	wroteSinceErasure                   bool
	metadataErased                      bool
	histKnown                           int   // leading moves whose seq and moved_at have been read
	queue                               []mOp // operations the conversation's next steps must run
	awayFrom                            *mMsg
}

// mMsg is one message.
type mMsg struct {
	conv         *mConv
	id           string
	seq          int // creation order within the conversation
	parent       *mMsg
	children     []*mMsg
	role         string
	parts        []mPart
	partsJSON    string
	want         any // partsJSON decoded
	branchReason string
	depth        int
	sibIndex     int
	createdAt    time.Time
	erased       bool
	marker       string
	// How to repeat the call that made it (retries): "" when the id was
	// the database's, else "append", "edit" or "regenerate".
	madeBy   string
	original *mMsg // for edit and regenerate
	calls    []*mCall
}

// mPart is one part of a message as sent.
type mPart struct {
	typ, text, callID, tool, input, useID, content, uri string
	in                                                  mInput // a purchase's input, parsed
}

// mMove is one head move.
type mMove struct {
	head, prev      *mMsg
	reason, movedBy string
	seq             int64
	at              time.Time
}

// mCall is one tool_use part.
type mCall struct {
	id       string
	msg      *mMsg
	tool     string
	input    mInput
	decision string // "" for a tool that was not registered
	effect   *mEffect
	fork     string // the fork point's message id, or "conversation"
}

// mInput is a tool input as sent.
type mInput struct {
	json      string
	valid     bool
	canon     string // the canonical arguments of a valid input
	amount    int64
	hasAmount bool
	currency  string
}

// mSettle is one settlement's arguments.
type mSettle struct {
	value string // external ref or error code
	http  int32
}

// mEffect is one ledger effect.
type mEffect struct {
	id, key      string // read back
	tool         string
	state        string
	calls        []*mCall
	ref, errCode string
	http         int32
	compBy       string
	amount       int64
	hasAmount    bool
	currency     string
	applied      *mSettle // the applied settlement, kept for repeats
	failed       *mSettle // a failed settlement by settle_effect
	confirmedBy  string
	declinedBy   string
	rejected     bool
	candidates   []*mEffect // the effects a confirm re-runs (one of them)
	newKeyDue    bool       // confirmed: the key must have changed
	settledAt    time.Time
	argsErased   bool
}

// mGen is one generation.
type mGen struct {
	id               string
	clientID         bool
	prompt           *mMsg
	headAtBegin      *mMsg
	movedSinceBegin  bool
	state            string
	msg              *mMsg
	parts            string
	usage, finish    string
	errCode, errJSON string
	model, params    string
	erased           bool
}

// mWorker runs one stream of operations on its own conversations.
type mWorker struct {
	s         modelSettings
	idx, ops  int
	ctx       context.Context
	rng       *rand.Rand
	db        *pgxpool.Pool
	live      []*mConv
	n         int
	step      int
	desc      string
	trail     []string
	stats     map[string]int
	effectIDs map[string]*mEffect
	keys      map[string]*mEffect
	msgIDs    map[string]*mMsg
	// What the current step asks the verification to look at.
	focus      []*mMsg
	checkCalls []*mCall
	also       []*mConv
}

// errSkip says that an operation does not apply to the conversation as it
// is (no user message to edit, say): the worker draws another.
var errSkip = errors.New("not applicable")

func (w *mWorker) run() error {
	for i := 0; i < 3; i++ {
		if err := w.newConversation(); err != nil {
			return w.fail("create", err)
		}
	}
	for w.step = 1; w.step <= w.ops; w.step++ {
		c := w.live[w.rng.IntN(len(w.live))]
		if err := w.doStep(c); err != nil {
			return err
		}
		if c.ops++; c.ops >= c.life {
			if err := w.verify(c, true); err != nil {
				return w.fail("full check before retiring "+c.id, err)
			}
			w.live = slices.DeleteFunc(w.live, func(x *mConv) bool { return x == c })
			if err := w.newConversation(); err != nil {
				return w.fail("create", err)
			}
		}
		if w.step%250 == 0 || w.step == w.ops {
			for _, x := range w.live {
				if err := w.verify(x, true); err != nil {
					return w.fail("full check of "+x.id, err)
				}
			}
		}
	}
	return nil
}

// fail wraps err with everything needed to replay it.
func (w *mWorker) fail(op string, err error) error {
	return fmt.Errorf("seed %d, worker %d, step %d, operation %s:\n%v\nreplay: PGCONVO_MODEL_SEED=%d PGCONVO_MODEL_OPS=%d PGCONVO_MODEL_WORKERS=%d go test ./tests -run TestModel\nthe worker's last operations, oldest first:\n  %s",
		w.s.seed, w.idx, w.step, op, err, w.s.seed, w.s.ops, w.s.workers, strings.Join(w.trail, "\n  "))
}

func (w *mWorker) count(k string) { w.stats[k]++ }

// doStep draws an operation by weight, runs it and verifies.
func (w *mWorker) doStep(c *mConv) error {
	for attempt := 0; attempt < 50; attempt++ {
		op := w.pickOp()
		if len(c.queue) > 0 {
			op, c.queue = c.queue[0], c.queue[1:]
		}
		w.desc, w.focus, w.checkCalls, w.also = op.name, nil, nil, nil
		err := op.fn(w, c)
		if errors.Is(err, errSkip) {
			continue
		}
		w.trail = append(w.trail, fmt.Sprintf("step %d, %s: %s", w.step, c.id, w.desc))
		if len(w.trail) > 12 {
			w.trail = w.trail[1:]
		}
		if err != nil {
			return w.fail(w.desc, err)
		}
		for _, x := range append([]*mConv{c}, w.also...) {
			if err := w.verify(x, false); err != nil {
				return w.fail(w.desc, err)
			}
		}
		return nil
	}
	return w.fail("draw", errors.New("no applicable operation in 50 draws"))
}

type mOp struct {
	name   string
	weight int
	fn     func(w *mWorker, c *mConv) error
}

var mOps = []mOp{
	{"append user text", 14, (*mWorker).opAppendUser},
	{"append assistant text", 5, (*mWorker).opAppendAssistantText},
	{"append assistant tool_use", 14, (*mWorker).opAppendAssistantCalls},
	{"append tool results", 9, (*mWorker).opAppendResults},
	{"edit_and_resend", 8, (*mWorker).opEdit},
	{"regenerate", 6, (*mWorker).opRegenerate},
	{"move_head", 8, (*mWorker).opMoveHead},
	{"begin_generation", 6, (*mWorker).opBegin},
	{"complete_generation", 6, (*mWorker).opComplete},
	{"fail_generation", 2, (*mWorker).opFail},
	{"cancel_generation", 2, (*mWorker).opCancel},
	{"begin_generation retry", 1, (*mWorker).opBeginRetry},
	{"settle applied", 7, (*mWorker).opSettleApplied},
	{"settle failed", 3, (*mWorker).opSettleFailed},
	{"compensate", 3, (*mWorker).opCompensate},
	{"confirm", 3, (*mWorker).opConfirm},
	{"decline", 2, (*mWorker).opDecline},
	{"settle without a reference", 1, (*mWorker).opSettleBadArgument},
	{"effect of another conversation", 1, (*mWorker).opEffectElsewhere},
	{"retry", 3, (*mWorker).opRetry},
	{"wrong role", 2, (*mWorker).opWrongRole},
	{"stale expected head", 2, (*mWorker).opStaleHead},
	{"message of another conversation", 1, (*mWorker).opMessageElsewhere},
	{"bad parts", 2, (*mWorker).opBadParts},
	{"call lookups that fail", 1, (*mWorker).opCallNotHere},
	{"erase_conversation", 1, (*mWorker).opErase},
	{"create_conversation retry", 1, (*mWorker).opCreateRetry},
}

var mOpsTotal = func() int {
	n := 0
	for _, o := range mOps {
		n += o.weight
	}
	return n
}()

func (w *mWorker) pickOp() mOp {
	r := w.rng.IntN(mOpsTotal)
	for _, o := range mOps {
		if r < o.weight {
			return o
		}
		r -= o.weight
	}
	panic("unreachable")
}

// ---------------------------------------------------------------------------
// Random values.

// uuid returns a version-4 uuid drawn from the worker's generator.
func (w *mWorker) uuid() string {
	a, b := w.rng.Uint64(), w.rng.Uint64()
	a = a&^(0xf<<12) | 0x4<<12
	b = b&^(0x3<<62) | 0x2<<62
	h := fmt.Sprintf("%016x%016x", a, b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (w *mWorker) marker() string {
	w.n++
	return fmt.Sprintf("mk%dx%d", w.idx, w.n)
}

func (w *mWorker) chance(percent int) bool { return w.rng.IntN(100) < percent }

func pick[T any](w *mWorker, from []T) T { return from[w.rng.IntN(len(from))] }

// sep is a separator with or without insignificant whitespace.
func (w *mWorker) sep() string { return pick(w, []string{",", ", ", " ,\n "}) }

// obj writes a JSON object of the given raw members, in a random order.
func (w *mWorker) obj(members ...string) string {
	w.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(members, w.sep()) + "}"
}

func (w *mWorker) partsJSON(parts []mPart) string {
	raw := make([]string, len(parts))
	for i, p := range parts {
		switch p.typ {
		case "text":
			raw[i] = w.obj(`"type": "text"`, `"text": `+strconv.Quote(p.text))
		case "attachment":
			raw[i] = w.obj(`"type": "attachment"`, `"uri": `+strconv.Quote(p.uri), `"media_type": "image/png"`)
		case "tool_use":
			raw[i] = w.obj(`"type": "tool_use"`, `"id": `+strconv.Quote(p.callID), `"name": `+strconv.Quote(p.tool), `"input": `+p.input)
		case "tool_result":
			raw[i] = w.obj(`"type": "tool_result"`, `"tool_use_id": `+strconv.Quote(p.useID), `"content": `+p.content)
		}
	}
	return "[" + strings.Join(raw, w.sep()) + "]"
}

// buyInput draws the input of a purchase: mostly valid, with amounts and
// currencies from small sets so that arguments repeat, keys in any order,
// 500.0 beside 500 (valid: the README's integer accepts 1.0; a different
// canonical argument), and some that the schema rejects.
func (w *mWorker) buyInput() mInput {
	type amount struct {
		lit string
		val int64
		ok  bool
	}
	a := amount{"0", 0, false}
	switch r := w.rng.IntN(100); {
	case r < 30:
		a = amount{"500", 500, true}
	case r < 55:
		a = amount{"100", 100, true}
	case r < 75:
		a = amount{"250", 250, true}
	case r < 90:
		a = amount{"500.0", 500, true}
	case r < 95:
		a = amount{"100001", 100001, false}
	}
	cur := "eur"
	if r := w.rng.IntN(100); r < 60 {
		cur = "EUR"
	} else if r < 95 {
		cur = "USD"
	}
	in := mInput{valid: a.ok && cur != "eur", amount: a.val, hasAmount: true}
	members := []string{`"amount_minor": ` + a.lit}
	switch r := w.rng.IntN(100); {
	case r < 96:
		members = append(members, `"currency": `+strconv.Quote(cur))
	case r < 98:
		in.valid = false // currency missing
		cur = ""
	default:
		in.valid = false // a key the schema does not allow
		members = append(members, `"currency": `+strconv.Quote(cur), `"note": "x"`)
	}
	if cur != "" && cur != "eur" {
		in.currency = cur // the README: a currency when it is three capitals
	}
	in.json = w.obj(members...)
	if in.valid {
		in.canon = a.lit + "|" + cur
	}
	return in
}

// assistantCalls draws one or two tool_use parts (and sometimes a text
// part) for a new assistant message of conversation c.
func (w *mWorker) assistantCalls(c *mConv, marker string) []mPart {
	var parts []mPart
	if w.chance(25) {
		parts = append(parts, mPart{typ: "text", text: "let me do that " + marker})
	}
	n := 1
	if w.chance(30) {
		n = 2
	}
	for i := 0; i < n; i++ {
		p := mPart{typ: "tool_use", callID: w.newCallID(c, parts)}
		switch r := w.rng.IntN(100); {
		case r < 27:
			p.tool = mToolCall
		case r < 54:
			p.tool = mToolConv
		case r < 84:
			p.tool = mToolFork
		case r < 96:
			p.tool = mToolLookup
		default:
			p.tool = mToolGhost
		}
		switch p.tool {
		case mToolLookup:
			p.input = w.obj(`"q": `+strconv.Quote(marker), `"k": 5`)
		case mToolGhost:
			p.input = `{"x": 1}`
		default:
			p.in = w.buyInput()
			p.input = p.in.json
		}
		parts = append(parts, p)
	}
	return parts
}

// newCallID draws a tool call id new in conversation c and in the parts
// being built: mostly fresh, now and then one that another conversation of
// the worker already uses (ids are unique within a conversation only).
func (w *mWorker) newCallID(c *mConv, building []mPart) string {
	if w.chance(5) {
		other := pick(w, w.live)
		if other != c && len(other.calls) > 0 {
			id := pick(w, other.calls).id
			taken := c.callByID[id] != nil
			for _, p := range building {
				taken = taken || p.callID == id
			}
			if !taken {
				return id
			}
		}
	}
	w.n++
	return fmt.Sprintf("toolu_%d_%d", w.idx, w.n)
}

func (w *mWorker) userParts(marker string) []mPart {
	parts := []mPart{{typ: "text", text: "user says " + marker}}
	if w.chance(10) {
		parts = append(parts, mPart{typ: "attachment", uri: "s3://bucket/" + marker + ".png"})
	}
	return parts
}

func (w *mWorker) assistantText(marker string) []mPart {
	return []mPart{{typ: "text", text: "assistant says " + marker}}
}

// resultsFor returns tool_result parts answering every call of m.
func resultsFor(m *mMsg, marker string) []mPart {
	var parts []mPart
	for _, call := range m.calls {
		parts = append(parts, mPart{typ: "tool_result", useID: call.id, content: `{"ok": true, "note": "` + marker + `"}`})
	}
	return parts
}

func (w *mWorker) movedBy() string { return pick(w, []string{"", "", "tab-1", "tab-2", "support"}) }

// ---------------------------------------------------------------------------
// The model's rules.

// addMsg records a new message under parent (nil: a root).
func (w *mWorker) addMsg(c *mConv, id string, parent *mMsg, role string, parts []mPart, js, reason, marker string) *mMsg {
	m := &mMsg{conv: c, id: id, seq: len(c.msgs), parent: parent, role: role, parts: parts, partsJSON: js,
		want: mDecode(js), branchReason: reason, marker: marker}
	if parent == nil {
		c.roots = append(c.roots, m)
		m.sibIndex = len(c.roots)
	} else {
		parent.children = append(parent.children, m)
		m.sibIndex = len(parent.children)
		m.depth = parent.depth + 1
	}
	c.msgs = append(c.msgs, m)
	c.byID[id] = m
	w.msgIDs[id] = m
	c.wroteSinceErasure = true
	return m
}

// pgtest.MoveHead moves the model's head; moving it where it is writes nothing.
func (c *mConv) moveHead(to *mMsg, reason, movedBy string) {
	if to == c.head {
		return
	}
	c.moves = append(c.moves, &mMove{head: to, prev: c.head, reason: reason, movedBy: movedBy})
	c.head = to
	for _, g := range c.gens {
		if g.state == "streaming" {
			g.movedSinceBegin = true
		}
	}
}

// path is root to head.
func (c *mConv) path() []*mMsg {
	var out []*mMsg
	for m := c.head; m != nil; m = m.parent {
		out = append(out, m)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func (c *mConv) siblings(m *mMsg) []*mMsg {
	if m.parent == nil {
		return c.roots
	}
	return m.parent.children
}

// latestLeaf is the most recently created leaf at or below m.
func latestLeaf(m *mMsg) *mMsg {
	if len(m.children) == 0 {
		return m
	}
	var best *mMsg
	for _, ch := range m.children {
		if l := latestLeaf(ch); best == nil || l.seq > best.seq {
			best = l
		}
	}
	return best
}

// ancestorOrSelf: a is m or one of m's ancestors.
func ancestorOrSelf(a, m *mMsg) bool {
	for x := m; x != nil; x = x.parent {
		if x == a {
			return true
		}
	}
	return false
}

// personTurn: a user message with a part other than tool_result.
func (m *mMsg) personTurn() bool {
	if m.role != "user" {
		return false
	}
	for _, p := range m.parts {
		if p.typ != "tool_result" {
			return true
		}
	}
	return false
}

// forkOf is the fork point of a call in message m: the parent of the
// nearest person's turn at or above m; "conversation" when that turn is a
// root or there is none.
func forkOf(m *mMsg) string {
	for x := m; x != nil; x = x.parent {
		if x.personTurn() {
			if x.parent == nil {
				return "conversation"
			}
			return x.parent.id
		}
	}
	return "conversation"
}

// decide writes the model's ledger decision for every tool_use part of the
// new assistant message m, in part order, by the contract's table: an
// unregistered tool gets none (effect_for_call: CV007), a tool without
// effects replay, an input the frozen schema refuses rejected (a failed
// effect, 422 invalid_arguments, never deduplicated); a scope key that
// already has an effect reuse, in the conversation's key epoch (its
// erasures so far: no call after an erasure meets a key from before it); a re-run (same tool, same fork point as an
// earlier executed, reused or confirmed call whose message is not m or an
// ancestor of m) confirm under a new key; anything else execute.
func (w *mWorker) decide(c *mConv, m *mMsg) {
	for _, p := range m.parts {
		if p.typ != "tool_use" {
			continue
		}
		call := &mCall{id: p.callID, msg: m, tool: p.tool, input: p.in}
		w.checkCalls = append(w.checkCalls, call)
		switch p.tool {
		case mToolGhost:
			w.count("decision:unregistered")
		case mToolLookup:
			call.decision = "replay"
		default:
			call.fork = forkOf(m)
			if call.fork == "conversation" {
				w.count("fork:conversation")
			} else {
				w.count("fork:message")
			}
			scope := mToolScope[p.tool]
			if !p.in.valid {
				call.decision = "rejected"
				e := w.newEffect(c, call, "failed")
				e.rejected, e.http, e.errCode = true, 422, "invalid_arguments"
				break
			}
			key := fmt.Sprintf("epoch %d|", c.erasures)
			switch scope {
			case "tool_call":
				key += "tool_call|" + call.id
			case "conversation_args":
				key += "conversation_args|" + p.tool + "|" + p.in.canon
			case "fork_args":
				key += "fork_args|" + call.fork + "|" + p.tool + "|" + p.in.canon
			}
			if e := c.byScope[key]; e != nil {
				call.decision, call.effect = "reuse", e
				e.calls = append(e.calls, call)
				w.count("scope:" + scope + ":reuse")
				break
			}
			var candidates []*mEffect
			for _, earlier := range c.calls {
				if earlier.tool == p.tool && earlier.fork == call.fork && !ancestorOrSelf(earlier.msg, m) &&
					(earlier.decision == "execute" || earlier.decision == "reuse" || earlier.decision == "confirm") {
					candidates = append(candidates, earlier.effect)
				}
			}
			if len(candidates) > 0 {
				call.decision = "confirm"
				e := w.newEffect(c, call, "awaiting_confirmation")
				e.candidates = candidates
				c.byScope[key] = e
			} else {
				call.decision = "execute"
				c.byScope[key] = w.newEffect(c, call, "pending")
			}
			w.count("scope:" + scope + ":" + call.decision)
		}
		if call.decision != "" {
			w.count("decision:" + call.decision)
		}
		c.calls = append(c.calls, call)
		c.callByID[call.id] = call
		m.calls = append(m.calls, call)
	}
}

// newEffect is a new effect of call, its id and key not known yet.
func (w *mWorker) newEffect(c *mConv, call *mCall, state string) *mEffect {
	e := &mEffect{tool: call.tool, state: state, calls: []*mCall{call},
		amount: call.input.amount, hasAmount: call.input.hasAmount, currency: call.input.currency}
	call.effect = e
	c.effects = append(c.effects, e)
	return e
}

// touch asks the step's verification to look at e's calls.
func (w *mWorker) touch(e *mEffect) {
	w.checkCalls = append(w.checkCalls, e.calls...)
}

// erase is the model of erase_conversation: content goes, nothing else.
func (c *mConv) erase() {
	for _, m := range c.msgs {
		m.erased = true
	}
	for _, e := range c.effects {
		e.argsErased = true
	}
	for _, g := range c.gens {
		g.erased = true
	}
	c.metadataErased = true
	c.erasures++
	c.wroteSinceErasure = false
}

// ---------------------------------------------------------------------------
// Calling the database.

// sqlErr compares an error with the SQLSTATE the model expects ("" for
// success).
func sqlErr(err error, want string) error {
	got := pgtest.SQLState(err)
	switch {
	case want == "" && err != nil:
		return fmt.Errorf("the model expects success, the database answered: %v", err)
	case want != "" && err == nil:
		return fmt.Errorf("the model expects SQLSTATE %s, the database answered success", want)
	case want != "" && got != want:
		return fmt.Errorf("the model expects SQLSTATE %s, the database answered: %v", want, err)
	}
	return nil
}

func (w *mWorker) queryText(want string, sql string, args ...any) (string, error) {
	var out string
	err := w.db.QueryRow(w.ctx, sql, args...).Scan(&out)
	return out, sqlErr(err, want)
}

func (w *mWorker) exec(want string, sql string, args ...any) error {
	_, err := w.db.Exec(w.ctx, sql, args...)
	return sqlErr(err, want)
}

// newMsgID checks an id the database returned for a new message.
func (w *mWorker) newMsgID(id, clientID string) error {
	if clientID != "" && id != clientID {
		return fmt.Errorf("the database returned %s for a message the caller named %s", id, clientID)
	}
	if w.msgIDs[id] != nil {
		return fmt.Errorf("the database returned %s for a new message: the id of an existing one", id)
	}
	return nil
}

func (w *mWorker) newConversation() error {
	c := &mConv{id: w.uuid(), byID: map[string]*mMsg{}, callByID: map[string]*mCall{}, byScope: map[string]*mEffect{},
		life: 100 + w.rng.IntN(200), marker: w.marker()}
	c.owner = fmt.Sprintf("owner-%d-%d", w.idx, w.n)
	c.metadata = `{"model_test": "` + c.marker + `"}`
	if w.chance(70) {
		c.prompt = "You are the model test's assistant " + c.marker
	}
	w.desc = fmt.Sprintf("create_conversation(%s, prompt %q, %s)", c.owner, c.prompt, c.id)
	id, err := w.queryText("", `SELECT convo.create_conversation($1, $2, $3::jsonb, $4)::text`, c.owner, pgtest.Nullable(c.prompt), c.metadata, c.id)
	if err != nil {
		return err
	}
	if id != c.id {
		return fmt.Errorf("create_conversation returned %s for the id %s", id, c.id)
	}
	w.live = append(w.live, c)
	if c.prompt != "" {
		head, err := w.queryText("", `SELECT coalesce(head_message_id::text, '') FROM convo.conversations WHERE id = $1`, c.id)
		if err != nil {
			return err
		}
		if head == "" || w.msgIDs[head] != nil {
			return fmt.Errorf("a conversation with a system prompt has head %q, want a new message", head)
		}
		parts := []mPart{{typ: "text", text: c.prompt}}
		m := w.addMsg(c, head, nil, "system", parts, `[{"type": "text", "text": `+strconv.Quote(c.prompt)+`}]`, "", c.marker)
		c.moveHead(m, "create", "")
	}
	return w.verify(c, false)
}

// ---------------------------------------------------------------------------
// Operations on the tree.

func (w *mWorker) opAppendUser(c *mConv) error {
	mk := w.marker()
	return w.appendMsg(c, "user", w.userParts(mk), mk)
}

func (w *mWorker) opAppendAssistantText(c *mConv) error {
	mk := w.marker()
	return w.appendMsg(c, "assistant", w.assistantText(mk), mk)
}

func (w *mWorker) opAppendAssistantCalls(c *mConv) error {
	mk := w.marker()
	return w.appendMsg(c, "assistant", w.assistantCalls(c, mk), mk)
}

// opAppendResults answers the head's calls: as a tool message, as a user
// message that only carries results (the agent loop's, not a person's
// turn), or as a user message that also says something (a person's turn).
func (w *mWorker) opAppendResults(c *mConv) error {
	if c.head == nil || c.head.role != "assistant" || len(c.head.calls) == 0 {
		return errSkip
	}
	mk := w.marker()
	parts := resultsFor(c.head, mk)
	role := "tool"
	switch r := w.rng.IntN(10); {
	case r < 3:
		role = "user"
	case r < 5:
		role = "user"
		parts = append(parts, mPart{typ: "text", text: "and also " + mk})
	}
	return w.appendMsg(c, role, parts, mk)
}

func (w *mWorker) appendMsg(c *mConv, role string, parts []mPart, mk string) error {
	js := w.partsJSON(parts)
	clientID, expected, movedBy := "", "", w.movedBy()
	if w.chance(60) {
		clientID = w.uuid()
	}
	if c.head != nil && w.chance(15) {
		expected = c.head.id
	}
	w.desc = fmt.Sprintf("append_message(%s, %s, expected head %q, id %q, moved_by %q)", role, js, expected, clientID, movedBy)
	id, err := w.queryText("", `SELECT convo.append_message($1, $2, $3::jsonb, p_expected_head => $4, p_message_id => $5, p_moved_by => $6)::text`,
		c.id, role, js, pgtest.Nullable(expected), pgtest.Nullable(clientID), pgtest.Nullable(movedBy))
	if err != nil {
		return err
	}
	if err := w.newMsgID(id, clientID); err != nil {
		return err
	}
	reason := ""
	switch {
	case c.head == nil:
		w.count("append:root")
	case len(c.head.children) > 0:
		reason = "branch"
		w.count("append:branch")
	}
	m := w.addMsg(c, id, c.head, role, parts, js, reason, mk)
	if clientID != "" {
		m.madeBy = "append"
	}
	c.moveHead(m, "append", movedBy)
	w.decide(c, m)
	w.focus = append(w.focus, m)
	w.count("append:ok")
	return nil
}

// pickMsg draws a message of one of roles: on the path with the given
// chance, else any.
func (w *mWorker) pickMsg(c *mConv, onPath int, roles ...string) *mMsg {
	fits := func(from []*mMsg) []*mMsg {
		var out []*mMsg
		for _, m := range from {
			for _, r := range roles {
				if m.role == r {
					out = append(out, m)
				}
			}
		}
		return out
	}
	if w.chance(onPath) {
		if on := fits(c.path()); len(on) > 0 {
			return pick(w, on)
		}
	}
	if all := fits(c.msgs); len(all) > 0 {
		return pick(w, all)
	}
	return nil
}

func (w *mWorker) onPath(c *mConv, m *mMsg) bool { return ancestorOrSelf(m, c.head) }

func (w *mWorker) opEdit(c *mConv) error {
	orig := w.pickMsg(c, 50, "user")
	// A root question is one message among many a conversation holds:
	// edit one now and then, so that a run reaches "edit:root" whatever
	// its seed (a seed's run of 10,000 operations once never did).
	if w.chance(5) {
		var roots []*mMsg
		for _, m := range c.msgs {
			if m.parent == nil && m.role == "user" {
				roots = append(roots, m)
			}
		}
		if len(roots) > 0 {
			orig = pick(w, roots)
		}
	}
	if orig == nil {
		return errSkip
	}
	mk := w.marker()
	return w.sibling(c, orig, "edit_and_resend", "user_edit", w.userParts(mk), mk)
}

func (w *mWorker) opRegenerate(c *mConv) error {
	orig := w.pickMsg(c, 50, "assistant")
	if orig == nil {
		return errSkip
	}
	mk := w.marker()
	parts := w.assistantText(mk)
	if w.chance(50) {
		parts = w.assistantCalls(c, mk)
	}
	return w.sibling(c, orig, "regenerate", "regenerate", parts, mk)
}

// sibling runs edit_and_resend or regenerate of orig.
func (w *mWorker) sibling(c *mConv, orig *mMsg, fn, reason string, parts []mPart, mk string) error {
	js := w.partsJSON(parts)
	clientID, expected, movedBy := "", "", w.movedBy()
	if w.chance(60) {
		clientID = w.uuid()
	}
	if w.chance(10) {
		expected = c.head.id
	}
	w.desc = fmt.Sprintf("%s(%s, %s, expected head %q, new id %q, moved_by %q)", fn, orig.id, js, expected, clientID, movedBy)
	id, err := w.queryText("", `SELECT convo.`+fn+`($1, $2, $3::jsonb, p_expected_head => $4, p_new_message_id => $5, p_moved_by => $6)::text`,
		c.id, orig.id, js, pgtest.Nullable(expected), pgtest.Nullable(clientID), pgtest.Nullable(movedBy))
	if err != nil {
		return err
	}
	if err := w.newMsgID(id, clientID); err != nil {
		return err
	}
	kind := map[string]string{"edit_and_resend": "edit", "regenerate": "regenerate"}[fn]
	if !w.onPath(c, orig) {
		w.count(kind + ":off_path")
	}
	if orig.parent == nil {
		w.count(kind + ":root")
	}
	m := w.addMsg(c, id, orig.parent, orig.role, parts, js, reason, mk)
	if clientID != "" {
		m.madeBy, m.original = kind, orig
	}
	c.moveHead(m, reason, movedBy)
	w.decide(c, m)
	w.focus = append(w.focus, m, orig)
	w.count(kind + ":ok")
	return nil
}

func (w *mWorker) opMoveHead(c *mConv) error {
	if len(c.msgs) == 0 {
		return errSkip
	}
	var to *mMsg
	switch r := w.rng.IntN(100); {
	case r < 10:
		to = c.head
	case r < 30 && len(c.moves) > 1:
		to = c.moves[len(c.moves)-1].prev // back to where it was: away and back
	case r < 50:
		to = latestLeaf(pick(w, c.msgs))
	default:
		to = pick(w, c.msgs)
	}
	if to == nil {
		to = pick(w, c.msgs)
	}
	reason, expected, movedBy := "", "", w.movedBy()
	if w.chance(20) {
		reason = pick(w, []string{"restore", "tab_sync"})
	}
	if w.chance(15) {
		expected = c.head.id
	}
	w.desc = fmt.Sprintf("move_head(%s, reason %q, expected head %q, moved_by %q)", to.id, reason, expected, movedBy)
	var err error
	if reason == "" {
		err = w.exec("", `SELECT convo.move_head($1, $2, p_expected_head => $3, p_moved_by => $4)`, c.id, to.id, pgtest.Nullable(expected), pgtest.Nullable(movedBy))
		reason = "switch"
	} else {
		err = w.exec("", `SELECT convo.move_head($1, $2, $3, $4, $5)`, c.id, to.id, reason, pgtest.Nullable(expected), pgtest.Nullable(movedBy))
		w.count("move:custom_reason")
	}
	if err != nil {
		return err
	}
	if to == c.head {
		w.count("move:noop")
	} else {
		c.wroteSinceErasure = true
	}
	c.moveHead(to, reason, movedBy)
	w.focus = append(w.focus, to)
	w.count("move:ok")
	return nil
}

// ---------------------------------------------------------------------------
// Generations.

func (w *mWorker) opBegin(c *mConv) error {
	var prompt *mMsg
	if c.head != nil && (c.head.role == "user" || c.head.role == "tool") && w.chance(60) {
		prompt = c.head
	} else if prompt = w.pickMsg(c, 30, "user", "tool"); prompt == nil {
		return errSkip
	}
	g := &mGen{prompt: prompt, headAtBegin: c.head, state: "streaming", model: pick(w, []string{"m-1", "m-2"}),
		params: `{"temperature": 0.5, "note": "` + w.marker() + `"}`}
	clientID := ""
	if w.chance(50) {
		clientID, g.clientID = w.uuid(), true
	}
	w.desc = fmt.Sprintf("begin_generation(prompt %s, %s, %s, id %q)", prompt.id, g.model, g.params, clientID)
	id, err := w.queryText("", `SELECT convo.begin_generation($1, $2, $3, $4::jsonb, p_generation_id => $5)::text`,
		c.id, prompt.id, g.model, g.params, pgtest.Nullable(clientID))
	if err != nil {
		return err
	}
	if clientID != "" && id != clientID {
		return fmt.Errorf("begin_generation returned %s for the id %s", id, clientID)
	}
	for _, other := range c.gens {
		if other.id == id {
			return fmt.Errorf("begin_generation returned the id of an existing generation, %s", id)
		}
	}
	g.id = id
	c.gens = append(c.gens, g)
	if w.chance(40) {
		// As an agent loop does, the answer comes next; now and then
		// another tab moves the head away and back first.
		if w.chance(30) && len(c.msgs) > 1 {
			c.queue = append(c.queue, mOp{"move_head away", 0, (*mWorker).opMoveAway}, mOp{"move_head back", 0, (*mWorker).opMoveBack})
		}
		c.queue = append(c.queue, mOp{"complete_generation", 0, func(w *mWorker, c *mConv) error { return w.complete(c, g) }})
	}
	c.wroteSinceErasure = true
	w.focus = append(w.focus, prompt)
	w.count("gen:begun")
	return nil
}

func (w *mWorker) opBeginRetry(c *mConv) error {
	var retryable []*mGen
	for _, g := range c.gens {
		if g.clientID && !g.erased { // an erased generation's params are gone: its retry is left open
			retryable = append(retryable, g)
		}
	}
	if len(retryable) == 0 {
		return errSkip
	}
	g := pick(w, retryable)
	model, want := g.model, ""
	if w.chance(25) {
		model, want = g.model+"-other", "CV009"
	}
	w.desc = fmt.Sprintf("begin_generation retry of %s (%s, model %s)", g.id, g.state, model)
	id, err := w.queryText(want, `SELECT convo.begin_generation($1, $2, $3, $4::jsonb, p_generation_id => $5)::text`,
		c.id, g.prompt.id, model, g.params, g.id)
	if err != nil {
		return err
	}
	if want != "" {
		w.count("gen:CV009")
		return nil
	}
	if id != g.id {
		return fmt.Errorf("a retried begin_generation returned %s, want %s", id, g.id)
	}
	w.count("gen:begin_retry")
	return nil
}

// pickGen draws a generation: a streaming one with the given chance.
func (w *mWorker) pickGen(c *mConv, streaming int) *mGen {
	if len(c.gens) == 0 {
		return nil
	}
	if w.chance(streaming) {
		var s []*mGen
		for _, g := range c.gens {
			if g.state == "streaming" {
				s = append(s, g)
			}
		}
		if len(s) > 0 {
			return pick(w, s)
		}
	}
	return pick(w, c.gens)
}

func (w *mWorker) opComplete(c *mConv) error {
	g := w.pickGen(c, 70)
	if g == nil {
		return errSkip
	}
	if w.s.strict["json"] && w.chance(30) {
		if x := w.pickGenWhere(c, func(g *mGen) bool { return g.state == "completed" && strings.Contains(g.parts, `"k": 5`) }); x != nil {
			g = x
		}
	}
	return w.complete(c, g)
}

func (w *mWorker) pickGenWhere(c *mConv, ok func(g *mGen) bool) *mGen {
	var out []*mGen
	for _, g := range c.gens {
		if ok(g) {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return pick(w, out)
}

// opMoveAway and opMoveBack move the head away from where a generation
// began and back again.
func (w *mWorker) opMoveAway(c *mConv) error {
	c.awayFrom = c.head
	for to := c.head; ; to = pick(w, c.msgs) {
		if to != c.head {
			w.desc = fmt.Sprintf("move_head away to %s", to.id)
			if err := w.exec("", `SELECT convo.move_head($1, $2, 'away', p_moved_by => 'tab-2')`, c.id, to.id); err != nil {
				return err
			}
			c.moveHead(to, "away", "tab-2")
			c.wroteSinceErasure = true
			return nil
		}
	}
}

func (w *mWorker) opMoveBack(c *mConv) error {
	to := c.awayFrom
	w.desc = fmt.Sprintf("move_head back to %s", to.id)
	if err := w.exec("", `SELECT convo.move_head($1, $2, 'back', p_moved_by => 'tab-2')`, c.id, to.id); err != nil {
		return err
	}
	c.moveHead(to, "back", "tab-2")
	c.wroteSinceErasure = true
	return nil
}

// complete runs complete_generation of g.
func (w *mWorker) complete(c *mConv, g *mGen) error {
	mk := w.marker()
	parts := w.assistantText(mk)
	if g.state == "streaming" && w.chance(40) {
		parts = w.assistantCalls(c, mk)
	}
	js := w.partsJSON(parts)
	usage, finish := fmt.Sprintf(`{"output_tokens": %d}`, 1+w.rng.IntN(500)), "stop"
	want := ""
	repeat := false
	switch g.state {
	case "streaming":
	case "completed":
		switch {
		case w.s.strict["json"] && strings.Contains(g.parts, `"k": 5`) && !g.erased && w.chance(50):
			// Strict probe "json": the same parts but for 5.0 where it said 5.
			js, usage, finish, want = strings.Replace(g.parts, `"k": 5`, `"k": 5.0`, 1), g.usage, g.finish, "CV006"
			w.count("strict:json")
		case !g.erased && w.chance(50):
			// The exact repeat (an erased answer's repeat is left open:
			// the parts to compare with are gone).
			js, usage, finish, repeat = g.parts, g.usage, g.finish, true
		default:
			want = "CV006"
		}
	default:
		want = "CV006"
	}
	w.desc = fmt.Sprintf("complete_generation(%s [%s, prompt %s, head at begin %v], %s, %s)", g.id, g.state, g.prompt.id, mIDOf(g.headAtBegin), js, usage)
	id, err := w.queryText(want, `SELECT convo.complete_generation($1, $2, $3::jsonb, $4::jsonb, $5)::text`, c.id, g.id, js, usage, finish)
	if err != nil {
		return err
	}
	if want != "" {
		w.count("gen:CV006")
		return nil
	}
	if repeat {
		if id != g.msg.id {
			return fmt.Errorf("an exact repeat of complete_generation returned %s, want %s", id, g.msg.id)
		}
		w.count("gen:repeat")
		return nil
	}
	if err := w.newMsgID(id, ""); err != nil {
		return err
	}
	reason := ""
	for _, ch := range g.prompt.children {
		if ch.role == "assistant" {
			reason = "regenerate"
			break
		}
		reason = "branch"
	}
	// The head follows the answer only if it is where it was at
	// begin_generation (the README: away and back counts as unmoved).
	follows := c.head == g.headAtBegin
	if w.s.strict["moved"] && g.movedSinceBegin {
		follows = false // the contract's words: "only if the head has not moved since begin_generation"
	}
	m := w.addMsg(c, id, g.prompt, "assistant", parts, js, reason, mk)
	switch {
	case follows && g.movedSinceBegin:
		w.count("gen:completed:away_and_back")
	case follows:
		w.count("gen:completed:head_follows")
	default:
		w.count("gen:completed:head_stays")
	}
	if follows {
		hr := "append"
		if reason == "regenerate" {
			hr = "regenerate"
		}
		c.moveHead(m, hr, "")
	}
	g.state, g.msg, g.parts, g.usage, g.finish = "completed", m, js, usage, finish
	w.decide(c, m)
	w.focus = append(w.focus, m)
	return nil
}

func mIDOf(m *mMsg) string {
	if m == nil {
		return "none"
	}
	return m.id
}

func (w *mWorker) opFail(c *mConv) error {
	g := w.pickGen(c, 70)
	if g == nil {
		return errSkip
	}
	if w.s.strict["json"] && w.chance(30) {
		if x := w.pickGenWhere(c, func(g *mGen) bool { return g.errJSON == `{"retry_after": 5}` }); x != nil {
			g = x
		}
	}
	code, errJSON, want := pick(w, []string{"overloaded", "timeout"}), `{}`, ""
	if w.s.strict["json"] && g.state == "streaming" && w.chance(30) {
		errJSON = `{"retry_after": 5}`
	}
	noop := false
	switch g.state {
	case "streaming":
	case "failed":
		switch {
		case w.s.strict["json"] && g.errJSON == `{"retry_after": 5}` && w.chance(50):
			code, errJSON, want = g.errCode, `{"retry_after": 5.0}`, "CV006" // strict probe "json"
			w.count("strict:json")
		case w.chance(60) && (!g.erased || g.errJSON == `{}`): // an erased error detail is gone: left open
			code, errJSON, noop = g.errCode, g.errJSON, true
		default:
			errJSON = g.errJSON
			code, want = g.errCode+"_other", "CV006"
		}
	default:
		want = "CV006"
	}
	w.desc = fmt.Sprintf("fail_generation(%s [%s], %s, %s)", g.id, g.state, code, errJSON)
	if err := w.exec(want, `SELECT convo.fail_generation($1, $2, $3, $4::jsonb)`, c.id, g.id, code, errJSON); err != nil {
		return err
	}
	switch {
	case want != "":
		w.count("gen:CV006")
	case noop:
		w.count("gen:repeat")
	default:
		g.state, g.errCode, g.errJSON = "failed", code, errJSON
		c.wroteSinceErasure = true
		w.count("gen:failed")
	}
	return nil
}

func (w *mWorker) opCancel(c *mConv) error {
	g := w.pickGen(c, 70)
	if g == nil {
		return errSkip
	}
	want := ""
	if g.state != "streaming" && g.state != "cancelled" {
		want = "CV006"
	}
	w.desc = fmt.Sprintf("cancel_generation(%s [%s])", g.id, g.state)
	if err := w.exec(want, `SELECT convo.cancel_generation($1, $2)`, c.id, g.id); err != nil {
		return err
	}
	switch {
	case want != "":
		w.count("gen:CV006")
	case g.state == "cancelled":
		w.count("gen:repeat")
	default:
		g.state = "cancelled"
		c.wroteSinceErasure = true
		w.count("gen:cancelled")
	}
	return nil
}

// ---------------------------------------------------------------------------
// Effects. Each operation draws, with the given chances, an effect for
// which it is the next transition, an effect it already moved (to repeat
// it exactly), or any effect (mostly a wrong transition, CV006); the model
// decides which of the three it is from the effect's state and history.

// pickEffect draws an effect of c satisfying ok, or nil.
func (w *mWorker) pickEffect(c *mConv, ok func(e *mEffect) bool) *mEffect {
	var out []*mEffect
	for _, e := range c.effects {
		if ok(e) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return pick(w, out)
}

// drawEffect draws next (60%), repeat (25%) or any (15%), falling back to
// any effect.
func (w *mWorker) drawEffect(c *mConv, next, repeat func(e *mEffect) bool) (*mEffect, string) {
	r := w.rng.IntN(100)
	if r < 60 {
		if e := w.pickEffect(c, next); e != nil {
			return e, "next"
		}
	} else if r < 85 {
		if e := w.pickEffect(c, repeat); e != nil {
			return e, "repeat"
		}
	}
	if len(c.effects) == 0 {
		return nil, ""
	}
	return pick(w, c.effects), "any"
}

func (w *mWorker) evidence() string {
	if w.chance(50) {
		return `{}`
	}
	return `{"proof": "` + w.marker() + `"}`
}

func httpArg(h int32) any {
	if h == 0 {
		return nil
	}
	return h
}

// effectOutcome counts and checks an effect operation's outcome.
func (w *mWorker) effectOutcome(err error, want string, noop bool) error {
	if err != nil {
		return err
	}
	switch {
	case want != "":
		w.count("effect:" + want)
	case noop:
		w.count("effect:repeat")
	}
	return nil
}

func (w *mWorker) opSettleApplied(c *mConv) error {
	e, how := w.drawEffect(c, func(e *mEffect) bool { return e.state == "pending" },
		func(e *mEffect) bool { return e.applied != nil })
	if e == nil {
		return errSkip
	}
	w.n++
	s := mSettle{value: fmt.Sprintf("ch_%d_%d", w.idx, w.n), http: pick(w, []int32{0, 200, 201})}
	if how == "repeat" {
		s = *e.applied
	}
	// An exact repeat is a no-op, also after the effect was compensated
	// (the README: the settlement's columns stay as they were).
	noop := e.applied != nil && *e.applied == s
	want := ""
	if !noop && e.state != "pending" {
		want = "CV006"
	}
	w.desc = fmt.Sprintf("settle_effect(%s [%s], applied, %s, %d)", e.id, e.state, s.value, s.http)
	w.touch(e)
	err := w.exec(want, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_http_status => $4, p_evidence => $5::jsonb)`,
		c.id, e.id, s.value, httpArg(s.http), w.evidence())
	if want == "" && !noop && err == nil {
		e.state, e.applied, e.ref, e.http = "applied", &s, s.value, s.http
		c.wroteSinceErasure = true
		w.count("effect:applied")
	}
	return w.effectOutcome(err, want, noop)
}

func (w *mWorker) opSettleFailed(c *mConv) error {
	e, how := w.drawEffect(c, func(e *mEffect) bool { return e.state == "pending" },
		func(e *mEffect) bool { return e.failed != nil })
	if e == nil {
		return errSkip
	}
	s := mSettle{value: pick(w, []string{"card_declined", "upstream_error"}), http: pick(w, []int32{0, 402, 502})}
	if how == "repeat" {
		s = *e.failed
	}
	if w.s.strict["settle"] && w.chance(20) {
		// Strict probe "settle": exactly the values of a rejection or a
		// decline, which no settlement wrote.
		if x := w.pickEffect(c, func(e *mEffect) bool { return e.rejected || e.declinedBy != "" }); x != nil {
			e, s = x, mSettle{value: x.errCode, http: x.http}
		}
	}
	noop := e.failed != nil && *e.failed == s
	want := ""
	if !noop && e.state != "pending" {
		want = "CV006"
	}
	w.desc = fmt.Sprintf("settle_effect(%s [%s], failed, %s, %d)", e.id, e.state, s.value, s.http)
	w.touch(e)
	err := w.exec(want, `SELECT convo.settle_effect($1, $2, 'failed', p_http_status => $3, p_error_code => $4, p_evidence => $5::jsonb)`,
		c.id, e.id, httpArg(s.http), s.value, w.evidence())
	if want == "" && !noop && err == nil {
		e.state, e.failed, e.errCode, e.http = "failed", &s, s.value, s.http
		c.wroteSinceErasure = true
		w.count("effect:failed")
	}
	return w.effectOutcome(err, want, noop)
}

func (w *mWorker) opCompensate(c *mConv) error {
	e, how := w.drawEffect(c, func(e *mEffect) bool { return e.state == "applied" },
		func(e *mEffect) bool { return e.state == "compensated" })
	if e == nil {
		return errSkip
	}
	w.n++
	by := fmt.Sprintf("re_%d_%d", w.idx, w.n)
	if how == "repeat" {
		by = e.compBy
	}
	noop := e.state == "compensated" && e.compBy == by
	want := ""
	if !noop && e.state != "applied" {
		want = "CV006"
	}
	w.desc = fmt.Sprintf("compensate_effect(%s [%s], %s)", e.id, e.state, by)
	w.touch(e)
	err := w.exec(want, `SELECT convo.compensate_effect($1, $2, $3, $4::jsonb)`, c.id, e.id, by, w.evidence())
	if want == "" && !noop && err == nil {
		e.state, e.compBy = "compensated", by
		c.wroteSinceErasure = true
		w.count("effect:compensated")
	}
	return w.effectOutcome(err, want, noop)
}

func (w *mWorker) opConfirm(c *mConv) error {
	e, how := w.drawEffect(c, func(e *mEffect) bool { return e.state == "awaiting_confirmation" },
		func(e *mEffect) bool { return e.confirmedBy != "" })
	if e == nil {
		return errSkip
	}
	by := pick(w, []string{"person-a", "person-b"})
	if how == "repeat" {
		by = e.confirmedBy
	}
	// A repeat of the confirmation is a no-op whatever came after it.
	noop := e.confirmedBy != "" && e.confirmedBy == by
	want := ""
	if !noop && e.state != "awaiting_confirmation" {
		want = "CV006"
	}
	w.desc = fmt.Sprintf("confirm_effect(%s [%s], %s)", e.id, e.state, by)
	w.touch(e)
	err := w.exec(want, `SELECT convo.confirm_effect($1, $2, $3)`, c.id, e.id, by)
	if want == "" && !noop && err == nil {
		e.state, e.confirmedBy, e.newKeyDue = "pending", by, true
		c.wroteSinceErasure = true
		w.count("effect:confirmed")
	}
	return w.effectOutcome(err, want, noop)
}

func (w *mWorker) opDecline(c *mConv) error {
	e, how := w.drawEffect(c, func(e *mEffect) bool { return e.state == "awaiting_confirmation" },
		func(e *mEffect) bool { return e.declinedBy != "" })
	if e == nil {
		return errSkip
	}
	by := pick(w, []string{"person-a", "person-b"})
	if how == "repeat" {
		by = e.declinedBy
	}
	noop := e.declinedBy != "" && e.declinedBy == by
	want := ""
	if !noop && e.state != "awaiting_confirmation" {
		want = "CV006"
	}
	w.desc = fmt.Sprintf("decline_effect(%s [%s], %s)", e.id, e.state, by)
	w.touch(e)
	err := w.exec(want, `SELECT convo.decline_effect($1, $2, $3)`, c.id, e.id, by)
	if want == "" && !noop && err == nil {
		e.state, e.declinedBy, e.errCode = "failed", by, "declined"
		c.wroteSinceErasure = true
		w.count("effect:declined")
	}
	return w.effectOutcome(err, want, noop)
}

// opSettleBadArgument settles a pending effect without what the state
// needs (applied without a reference, failed without an error code):
// CV011, nothing written.
func (w *mWorker) opSettleBadArgument(c *mConv) error {
	e := w.pickEffect(c, func(e *mEffect) bool { return e.state == "pending" })
	if e == nil {
		return errSkip
	}
	w.touch(e)
	var err error
	if w.chance(50) {
		w.desc = fmt.Sprintf("settle_effect(%s [pending], applied, no reference)", e.id)
		err = w.exec("CV011", `SELECT convo.settle_effect($1, $2, 'applied')`, c.id, e.id)
	} else {
		w.desc = fmt.Sprintf("settle_effect(%s [pending], failed, no error code)", e.id)
		err = w.exec("CV011", `SELECT convo.settle_effect($1, $2, 'failed')`, c.id, e.id)
	}
	return w.effectOutcome(err, "CV011", false)
}

// opEffectElsewhere names, in c, an effect of another conversation (CV003)
// or one that does not exist (CV002).
func (w *mWorker) opEffectElsewhere(c *mConv) error {
	id, want := w.uuid(), "CV002"
	if other := pick(w, w.live); other != c && len(other.effects) > 0 && w.chance(70) {
		e := pick(w, other.effects)
		id, want = e.id, "CV003"
		w.also = append(w.also, other)
		w.touch(e)
	}
	fn := pick(w, []string{
		`SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_elsewhere')`,
		`SELECT convo.compensate_effect($1, $2, 're_elsewhere')`,
		`SELECT convo.confirm_effect($1, $2, 'person-a')`,
		`SELECT convo.decline_effect($1, $2, 'person-a')`,
	})
	w.desc = fmt.Sprintf("%s with effect %s (%s expected)", fn, id, want)
	return w.effectOutcome(w.exec(want, fn, c.id, id), want, false)
}

// ---------------------------------------------------------------------------
// Retries and refusals: each must write nothing, which the verification
// after the step checks against the unchanged model.

// opRetry repeats an append, edit or regeneration that named its own id:
// the same request (its parts written again in another key order and
// spacing, the same jsonb) returns the first id even when the head has
// moved and p_expected_head is stale; other parts are CV009. A message
// made before an erasure is not retried: the request to compare with is
// gone, and the contract does not say what its retry answers.
func (w *mWorker) opRetry(c *mConv) error {
	var made []*mMsg
	for _, m := range c.msgs {
		if m.madeBy != "" && !m.erased {
			made = append(made, m)
		}
	}
	if len(made) == 0 {
		return errSkip
	}
	m := pick(w, made)
	js, want := w.partsJSON(m.parts), ""
	if w.chance(25) {
		js, want = w.partsJSON([]mPart{{typ: "text", text: "something else " + w.marker()}}), "CV009"
	}
	expected := ""
	if w.chance(50) {
		expected = pick(w, c.msgs).id
	}
	w.desc = fmt.Sprintf("retry of the %s of %s with %s, expected head %q", m.madeBy, m.id, js, expected)
	var id string
	var err error
	switch m.madeBy {
	case "append":
		id, err = w.queryText(want, `SELECT convo.append_message($1, $2, $3::jsonb, p_expected_head => $4, p_message_id => $5)::text`,
			c.id, m.role, js, pgtest.Nullable(expected), m.id)
	case "edit", "regenerate":
		fn := map[string]string{"edit": "edit_and_resend", "regenerate": "regenerate"}[m.madeBy]
		id, err = w.queryText(want, `SELECT convo.`+fn+`($1, $2, $3::jsonb, p_expected_head => $4, p_new_message_id => $5)::text`,
			c.id, m.original.id, js, pgtest.Nullable(expected), m.id)
	}
	if err != nil {
		return err
	}
	if want != "" {
		w.count("retry:CV009")
		return nil
	}
	if id != m.id {
		return fmt.Errorf("the retry returned %s, want %s", id, m.id)
	}
	w.focus = append(w.focus, m)
	w.count("retry:" + m.madeBy)
	return nil
}

// opWrongRole edits a message that is not a user's or regenerates one that
// is not an assistant's: CV004.
func (w *mWorker) opWrongRole(c *mConv) error {
	fn, m := "edit_and_resend", w.pickMsg(c, 50, "system", "assistant", "tool")
	if w.chance(50) {
		fn, m = "regenerate", w.pickMsg(c, 50, "system", "user", "tool")
	}
	if m == nil {
		return errSkip
	}
	w.desc = fmt.Sprintf("%s of %s message %s", fn, m.role, m.id)
	err := w.exec("CV004", `SELECT convo.`+fn+`($1, $2, $3::jsonb)`, c.id, m.id, w.partsJSON(w.userParts(w.marker())))
	if err == nil {
		w.count(map[string]string{"edit_and_resend": "edit", "regenerate": "regenerate"}[fn] + ":CV004")
	}
	w.focus = append(w.focus, m)
	return err
}

// opStaleHead appends, edits or moves the head with p_expected_head naming
// a message that is not the head: CV001.
func (w *mWorker) opStaleHead(c *mConv) error {
	var others []*mMsg
	for _, m := range c.msgs {
		if m != c.head {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return errSkip
	}
	stale := pick(w, others)
	mk := w.marker()
	var err error
	switch r := w.rng.IntN(3); {
	case r == 0:
		w.desc = fmt.Sprintf("append_message with stale expected head %s", stale.id)
		err = w.exec("CV001", `SELECT convo.append_message($1, 'user', $2::jsonb, p_expected_head => $3)`,
			c.id, w.partsJSON(w.userParts(mk)), stale.id)
		if err == nil {
			w.count("append:CV001")
		}
	case r == 1 && w.pickMsg(c, 0, "user") != nil:
		orig := w.pickMsg(c, 50, "user")
		w.desc = fmt.Sprintf("edit_and_resend(%s) with stale expected head %s", orig.id, stale.id)
		err = w.exec("CV001", `SELECT convo.edit_and_resend($1, $2, $3::jsonb, p_expected_head => $4)`,
			c.id, orig.id, w.partsJSON(w.userParts(mk)), stale.id)
		if err == nil {
			w.count("edit:CV001")
		}
	default:
		to := pick(w, c.msgs)
		w.desc = fmt.Sprintf("move_head(%s) with stale expected head %s", to.id, stale.id)
		err = w.exec("CV001", `SELECT convo.move_head($1, $2, p_expected_head => $3)`, c.id, to.id, stale.id)
		if err == nil {
			w.count("move:CV001")
		}
	}
	return err
}

// opMessageElsewhere names, in c, a message of another conversation
// (CV003) or one that does not exist (CV002).
func (w *mWorker) opMessageElsewhere(c *mConv) error {
	other := pick(w, w.live)
	if other == c || len(other.msgs) == 0 || w.chance(30) {
		id := w.uuid()
		w.desc = fmt.Sprintf("move_head to the unknown message %s", id)
		err := w.exec("CV002", `SELECT convo.move_head($1, $2)`, c.id, id)
		if err == nil {
			w.count("move:CV002")
		}
		return err
	}
	w.also = append(w.also, other)
	if u := w.pickMsg(other, 0, "user"); u != nil && w.chance(50) {
		w.desc = fmt.Sprintf("edit_and_resend of %s, a message of %s", u.id, other.id)
		return w.exec("CV003", `SELECT convo.edit_and_resend($1, $2, $3::jsonb)`, c.id, u.id, w.partsJSON(w.userParts(w.marker())))
	}
	m := pick(w, other.msgs)
	w.desc = fmt.Sprintf("move_head to %s, a message of %s", m.id, other.id)
	err := w.exec("CV003", `SELECT convo.move_head($1, $2)`, c.id, m.id)
	if err == nil {
		w.count("move:CV003")
	}
	return err
}

// opBadParts appends parts the contract refuses: a tool call id the
// conversation already has (CV008), a tool_result naming no tool_use of
// the parent (CV008), a tool_use in a user message (CV004).
func (w *mWorker) opBadParts(c *mConv) error {
	mk := w.marker()
	switch r := w.rng.IntN(3); {
	case r == 0 && len(c.calls) > 0:
		dup := pick(w, c.calls)
		parts := w.assistantCalls(c, mk)
		parts[len(parts)-1].callID = dup.id
		js := w.partsJSON(parts)
		w.desc = fmt.Sprintf("append_message(assistant, %s): the call id %s is taken", js, dup.id)
		err := w.exec("CV008", `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, c.id, js)
		if err == nil {
			w.count("parts:CV008_duplicate")
		}
		return err
	case r == 1:
		useID := fmt.Sprintf("toolu_none_%d", w.n)
		if len(c.calls) > 0 && w.chance(60) {
			if call := pick(w, c.calls); c.head == nil || call.msg != c.head {
				useID = call.id
			}
		}
		js := w.partsJSON([]mPart{{typ: "tool_result", useID: useID, content: `"` + mk + `"`}})
		role := pick(w, []string{"user", "tool"})
		w.desc = fmt.Sprintf("append_message(%s, %s): no tool_use %s in the head", role, js, useID)
		err := w.exec("CV008", `SELECT convo.append_message($1, $2, $3::jsonb)`, c.id, role, js)
		if err == nil {
			w.count("parts:CV008_result")
		}
		return err
	default:
		parts := append(w.userParts(mk), w.assistantCalls(c, mk)...)
		js := w.partsJSON(parts)
		w.desc = fmt.Sprintf("append_message(user, %s): tool_use outside an assistant message", js)
		err := w.exec("CV004", `SELECT convo.append_message($1, 'user', $2::jsonb)`, c.id, js)
		if err == nil {
			w.count("parts:CV004")
		}
		return err
	}
}

// opCallNotHere asks effect_for_call about a call of another conversation
// (CV003) or none (CV002).
func (w *mWorker) opCallNotHere(c *mConv) error {
	other := pick(w, w.live)
	if other != c && len(other.calls) > 0 && w.chance(70) {
		call := pick(w, other.calls)
		if c.callByID[call.id] == nil {
			w.also = append(w.also, other)
			w.desc = fmt.Sprintf("effect_for_call(%s), a call of %s", call.id, other.id)
			err := w.exec("CV003", `SELECT * FROM convo.effect_for_call($1, $2)`, c.id, call.id)
			if err == nil {
				w.count("call:CV003")
			}
			return err
		}
	}
	id := fmt.Sprintf("toolu_nowhere_%d", w.rng.IntN(1000))
	w.desc = fmt.Sprintf("effect_for_call(%s), a call of no conversation", id)
	err := w.exec("CV002", `SELECT * FROM convo.effect_for_call($1, $2)`, c.id, id)
	if err == nil {
		w.count("call:CV002")
	}
	return err
}

// opCreateRetry repeats c's create_conversation: the same owner, prompt
// and metadata return the id and write nothing; other metadata is CV009.
// Not after an erasure: the prompt and metadata to compare with are gone.
func (w *mWorker) opCreateRetry(c *mConv) error {
	if c.erasures > 0 {
		return errSkip
	}
	metadata, want := c.metadata, ""
	if w.chance(30) {
		metadata, want = `{"model_test": "other"}`, "CV009"
	}
	w.desc = fmt.Sprintf("create_conversation retry (%s, %q, %s, %s)", c.owner, c.prompt, metadata, c.id)
	id, err := w.queryText(want, `SELECT convo.create_conversation($1, $2, $3::jsonb, $4)::text`, c.owner, pgtest.Nullable(c.prompt), metadata, c.id)
	if err != nil {
		return err
	}
	if want != "" {
		w.count("create:CV009")
		return nil
	}
	if id != c.id {
		return fmt.Errorf("the retry returned %s, want %s", id, c.id)
	}
	w.count("create:retry")
	return nil
}

// opErase erases c. The places it reports are what the model says changed:
// messages (each with its parts, the one copy of them), conversations
// (the metadata, the first time), tool_effects (the arguments of every
// effect not erased yet); generations and tool_effect_events may appear
// too (params, usage, errors, evidence: the model does not count them). A
// repeat with nothing written since reports nothing.
func (w *mWorker) opErase(c *mConv) error {
	want := map[string]int64{}
	for _, m := range c.msgs {
		if !m.erased {
			want["messages"]++
		}
	}
	if !c.metadataErased {
		want["conversations"] = 1
	}
	for _, e := range c.effects {
		if !e.argsErased {
			want["tool_effects"]++
		}
	}
	quiet := c.erasures > 0 && !c.wroteSinceErasure
	w.desc = fmt.Sprintf("erase_conversation (erasure %d, written since the last: %v)", c.erasures+1, c.wroteSinceErasure)
	rows, err := w.db.Query(w.ctx, `SELECT place, rows_redacted FROM convo.erase_conversation($1, 'the model test erases it')`, c.id)
	if err != nil {
		return sqlErr(err, "")
	}
	got := map[string]int64{}
	for rows.Next() {
		var place string
		var n int64
		if err := rows.Scan(&place, &n); err != nil {
			return err
		}
		got[place] = n
	}
	if err := rows.Err(); err != nil {
		return sqlErr(err, "")
	}
	if quiet && len(got) > 0 {
		return fmt.Errorf("a repeat erasure with nothing written since reported %v, want no rows", got)
	}
	for place, n := range want {
		if n > 0 && got[place] != n {
			return fmt.Errorf("erase_conversation reported %v; want %s=%d (the model's places: %v)", got, place, n, want)
		}
	}
	for place := range got {
		if want[place] == 0 && place != "generations" && place != "tool_effect_events" {
			return fmt.Errorf("erase_conversation reported %v; the model expects nothing at %s (its places: %v)", got, place, want)
		}
	}
	switch {
	case quiet:
		w.count("erase:repeat")
	case c.erasures > 0:
		w.count("erase:then_more")
	}
	c.erase()
	if w.chance(30) {
		c.queue = append(c.queue, mOp{"erase_conversation again", 0, (*mWorker).opErase})
	}
	w.count("erase:ok")
	return nil
}
