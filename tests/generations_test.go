package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Generations: the model's work on a prompt, recorded apart from the
// messages. begin_generation (streaming), then exactly one of
// complete_generation (the assistant message), fail_generation or
// cancel_generation.

// genFixture is a conversation S (system) -> U (user), the head at U.
type genFixture struct {
	conv, s, u string
}

func newGenFixture(t testing.TB, db *pgxpool.Pool) genFixture {
	t.Helper()
	var f genFixture
	f.conv = createConversation(t, db, "owner-a", "You are helpful.")
	f.s = headOf(t, db, f.conv)
	f.u = appendMsg(t, db, f.conv, "user", textParts("What is the weather?"))
	return f
}

// headLogCount returns how many head-log rows the conversation has.
func headLogCount(t testing.TB, db *pgxpool.Pool, conv string) int {
	t.Helper()
	return queryRow[int](t, db, `SELECT count(*)::int FROM convo.conversation_head_log WHERE conversation_id = $1`, conv)
}

// TestBeginGeneration: a new generation streams, remembers the head at its
// start, and is retry-safe by p_generation_id; the same id with other
// parameters raises CV009 and writes nothing.
func TestBeginGeneration(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)

	g := beginGeneration(t, db, f.conv, f.u, "model-x")
	got := readGeneration(t, db, f.conv, g)
	requireEqual(t, "state", got.State, "streaming")
	requireEqual(t, "head_at_begin", got.HeadAtBegin, f.u)
	if got.Finished || got.MessageID != "" || got.Usage != "" || got.ErrorCode != "" {
		t.Fatalf("a new generation has an outcome: %+v", got)
	}
	requireCount(t, db, 1, `SELECT count(*) FROM convo.generations WHERE model = 'model-x' AND params = '{}' AND request_digest IS NULL`)

	// Retry safety.
	id := newID()
	const begin = `SELECT convo.begin_generation($1, $2, $3, $4, $5, $6)::text`
	first := queryRow[string](t, db, begin, f.conv, f.u, "model-y", `{"temperature": 0.2, "top_p": 1}`, "sha256:abc", id)
	requireEqual(t, "client id", first, id)
	before := readAPIState(t, db)
	again := queryRow[string](t, db, begin, f.conv, f.u, "model-y", `{"top_p":1,"temperature":0.2}`, "sha256:abc", id)
	requireEqual(t, "retry", again, id)
	requireAPIUnchanged(t, db, before)

	// A retry after the generation ended still answers with its id.
	completeGeneration(t, db, f.conv, id, textParts("Sunny."))
	requireEqual(t, "retry after completion", queryRow[string](t, db, begin, f.conv, f.u, "model-y", `{"temperature": 0.2, "top_p": 1}`, "sha256:abc", id), id)
	requireEqual(t, "state after the retry", readGeneration(t, db, f.conv, id).State, "completed")

	runCallCases(t, db, []callCase{
		{name: "same id, another model", sql: begin, args: []any{f.conv, f.u, "model-z", `{"temperature": 0.2, "top_p": 1}`, "sha256:abc", id}, code: "CV009", mentions: []string{id}},
		{name: "same id, other params", sql: begin, args: []any{f.conv, f.u, "model-y", `{"temperature": 0.3, "top_p": 1}`, "sha256:abc", id}, code: "CV009"},
		{name: "same id, no params", sql: begin, args: []any{f.conv, f.u, "model-y", `{}`, "sha256:abc", id}, code: "CV009"},
		{name: "same id, another digest", sql: begin, args: []any{f.conv, f.u, "model-y", `{"temperature": 0.2, "top_p": 1}`, "sha256:def", id}, code: "CV009"},
		{name: "same id, no digest", sql: begin, args: []any{f.conv, f.u, "model-y", `{"temperature": 0.2, "top_p": 1}`, nil, id}, code: "CV009"},
		{name: "same id, another prompt", sql: begin, args: []any{f.conv, f.s, "model-y", `{"temperature": 0.2, "top_p": 1}`, "sha256:abc", id}, code: "CV009"},
	})
}

// TestCompleteGenerationMovesAnUnmovedHead: the answer is an assistant child
// of the prompt; the head, still where it was at begin, moves to it (reason
// 'append'), and the generation records the message, usage and finish
// reason.
func TestCompleteGenerationMovesAnUnmovedHead(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)
	g := beginGeneration(t, db, f.conv, f.u, "model-x")
	logBefore := headLogCount(t, db, f.conv)

	a := queryRow[string](t, db, `SELECT convo.complete_generation($1, $2, $3, $4, $5)::text`,
		f.conv, g, textParts("Sunny."), `{"input_tokens": 12, "output_tokens": 3}`, "stop")
	requireEqual(t, "message", readMessage(t, db, f.conv, a),
		messageInfo{ParentID: f.u, Role: "assistant", Parts: queryRow[string](t, db, `SELECT $1::jsonb::text`, textParts("Sunny."))})
	requireEqual(t, "head", headOf(t, db, f.conv), a)
	requireEqual(t, "head-log rows", headLogCount(t, db, f.conv), logBefore+1)
	moves := readHeadHistory(t, db, f.conv)
	last := moves[len(moves)-1]
	requireEqual(t, "last move", [3]string{last.HeadMessageID, last.PreviousHeadID, last.Reason}, [3]string{a, f.u, "append"})
	requireSlice(t, "path", pathIDs(t, db, f.conv), []string{f.s, f.u, a})

	got := readGeneration(t, db, f.conv, g)
	want := generationRow{State: "completed", MessageID: a, HeadAtBegin: f.u,
		Usage: queryRow[string](t, db, `SELECT '{"input_tokens": 12, "output_tokens": 3}'::jsonb::text`), FinishReason: "stop", Finished: true}
	requireEqual(t, "generation", got, want)

	// The next turn: the user answers, a generation on the new prompt.
	u2 := appendMsg(t, db, f.conv, "user", textParts("And tomorrow?"))
	g2 := beginGeneration(t, db, f.conv, u2, "model-x")
	a2 := completeGeneration(t, db, f.conv, g2, textParts("Rain."))
	requireSlice(t, "path after a second turn", pathIDs(t, db, f.conv), []string{f.s, f.u, a, u2, a2})
	requireEqual(t, "branch reason of a first answer", readMessage(t, db, f.conv, a2).BranchReason, "")
}

// TestLateGenerationLeavesAMovedHead: when the head moved after
// begin_generation (another tab appended, or switched branches), the
// answer is stored under its prompt but the head stays where the user is,
// and no head-log row is written.
func TestLateGenerationLeavesAMovedHead(t *testing.T) {
	t.Parallel()
	db := newDB(t)

	// Another tab appended.
	f := newGenFixture(t, db)
	g := beginGeneration(t, db, f.conv, f.u, "model-x")
	other := appendMsg(t, db, f.conv, "user", textParts("Never mind, what time is it?"))
	logBefore := headLogCount(t, db, f.conv)
	a := completeGeneration(t, db, f.conv, g, textParts("Sunny."))
	requireEqual(t, "message", readMessage(t, db, f.conv, a).ParentID, f.u)
	requireEqual(t, "role", readMessage(t, db, f.conv, a).Role, "assistant")
	requireEqual(t, "head", headOf(t, db, f.conv), other)
	requireEqual(t, "head-log rows", headLogCount(t, db, f.conv), logBefore)
	requireEqual(t, "generation", readGeneration(t, db, f.conv, g).State, "completed")
	// The late answer is the second child of U: a branch beside the other tab's message.
	requireEqual(t, "branch reason of the late answer", readMessage(t, db, f.conv, a).BranchReason, "branch")
	alts := readAlternatives(t, db, f.conv, a)
	requireEqual(t, "alternatives of the late answer", len(alts), 2)
	requireEqual(t, "late answer on the head path", alts[1].OnHeadPath, false)

	// Another tab switched branches (the head moved up to S).
	f2 := newGenFixture(t, db)
	g2 := beginGeneration(t, db, f2.conv, f2.u, "model-x")
	moveHead(t, db, f2.conv, f2.s)
	logBefore = headLogCount(t, db, f2.conv)
	a2 := completeGeneration(t, db, f2.conv, g2, textParts("Sunny."))
	requireEqual(t, "head after a switch", headOf(t, db, f2.conv), f2.s)
	requireEqual(t, "head-log rows after a switch", headLogCount(t, db, f2.conv), logBefore)
	requireEqual(t, "parent", readMessage(t, db, f2.conv, a2).ParentID, f2.u)
	requireEqual(t, "branch reason of a first child", readMessage(t, db, f2.conv, a2).BranchReason, "")

	// A generation on an older prompt while the head has not moved: the
	// head follows the answer.
	f3 := newGenFixture(t, db)
	g3 := beginGeneration(t, db, f3.conv, f3.s, "model-x")
	a3 := completeGeneration(t, db, f3.conv, g3, textParts("Hello."))
	requireEqual(t, "head after an answer to an older prompt", headOf(t, db, f3.conv), a3)
	requireEqual(t, "branch reason beside a user child", readMessage(t, db, f3.conv, a3).BranchReason, "branch")
}

// TestGenerationRegenerateAndBranch: a generation on a prompt that already
// has an assistant child makes a 'regenerate' sibling and moves the head
// with reason 'regenerate'; on a prompt with only other children it makes a
// 'branch' and the head moves with reason 'append'.
func TestGenerationRegenerateAndBranch(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)
	a1 := completeGeneration(t, db, f.conv, beginGeneration(t, db, f.conv, f.u, "model-x"), textParts("Sunny."))

	// Regenerate: the head is on the first answer.
	g := beginGeneration(t, db, f.conv, f.u, "model-x")
	requireEqual(t, "head_at_begin", readGeneration(t, db, f.conv, g).HeadAtBegin, a1)
	a2 := completeGeneration(t, db, f.conv, g, textParts("Sunny, 21 degrees."))
	requireEqual(t, "regenerated message", readMessage(t, db, f.conv, a2),
		messageInfo{ParentID: f.u, Role: "assistant", BranchReason: "regenerate", Parts: queryRow[string](t, db, `SELECT $1::jsonb::text`, textParts("Sunny, 21 degrees."))})
	requireEqual(t, "head", headOf(t, db, f.conv), a2)
	moves := readHeadHistory(t, db, f.conv)
	last := moves[len(moves)-1]
	requireEqual(t, "last move", [3]string{last.HeadMessageID, last.PreviousHeadID, last.Reason}, [3]string{a2, a1, "regenerate"})
	alts := readAlternatives(t, db, f.conv, a1)
	requireSlice(t, "alternatives", []string{alts[0].MessageID, alts[1].MessageID}, []string{a1, a2})
	requireEqual(t, "first answer on the head path", alts[0].OnHeadPath, false)
	requireEqual(t, "regenerated answer on the head path", alts[1].OnHeadPath, true)

	// A third answer while the user went back to the prompt: still a regenerate.
	moveHead(t, db, f.conv, f.u)
	a3 := completeGeneration(t, db, f.conv, beginGeneration(t, db, f.conv, f.u, "model-x"), textParts("Warm."))
	requireEqual(t, "third answer's reason", readMessage(t, db, f.conv, a3).BranchReason, "regenerate")
	requireEqual(t, "head after the third answer", headOf(t, db, f.conv), a3)
	moves = readHeadHistory(t, db, f.conv)
	requireEqual(t, "reason of the move to the third answer", moves[len(moves)-1].Reason, "regenerate")

	// Branch: the prompt has only a user child.
	fb := newGenFixture(t, db)
	u2 := appendMsg(t, db, fb.conv, "user", textParts("Also: in Paris."))
	moveHead(t, db, fb.conv, fb.u)
	gb := beginGeneration(t, db, fb.conv, fb.u, "model-x")
	ab := completeGeneration(t, db, fb.conv, gb, textParts("Sunny."))
	requireEqual(t, "branch message", readMessage(t, db, fb.conv, ab).BranchReason, "branch")
	requireEqual(t, "branch parent", readMessage(t, db, fb.conv, ab).ParentID, fb.u)
	requireEqual(t, "head after a branch", headOf(t, db, fb.conv), ab)
	moves = readHeadHistory(t, db, fb.conv)
	requireEqual(t, "reason of the move to a branch", moves[len(moves)-1].Reason, "append")
	requireEqual(t, "user child kept", readMessage(t, db, fb.conv, u2).ParentID, fb.u)
	requireHeadChain(t, moves)
}

// TestFailAndCancelGeneration: streaming to failed (with its error code and
// details) or cancelled; no message is written and the head stays; exact
// repeats are no-ops.
func TestFailAndCancelGeneration(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)
	ctx := context.Background()

	g := beginGeneration(t, db, f.conv, f.u, "model-x")
	tree := snapshotCounts(t, db)
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, $3, $4)`, f.conv, g, "rate_limited", `{"retry_after": 30}`)
	got := readGeneration(t, db, f.conv, g)
	requireEqual(t, "failed generation", got, generationRow{State: "failed", HeadAtBegin: f.u, ErrorCode: "rate_limited",
		Error: `{"retry_after": 30}`, Finished: true})
	requireUnchanged(t, db, tree)
	before := readAPIState(t, db)
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, $3, $4)`, f.conv, g, "rate_limited", `{"retry_after":30}`)
	requireAPIUnchanged(t, db, before)

	// The default error is '{}'.
	g2 := beginGeneration(t, db, f.conv, f.u, "model-x")
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, 'timeout')`, f.conv, g2)
	requireEqual(t, "default error", readGeneration(t, db, f.conv, g2).Error, "{}")

	c := beginGeneration(t, db, f.conv, f.u, "model-x")
	mustExec(t, db, `SELECT convo.cancel_generation($1, $2)`, f.conv, c)
	requireEqual(t, "cancelled generation", readGeneration(t, db, f.conv, c),
		generationRow{State: "cancelled", HeadAtBegin: f.u, Finished: true})
	requireUnchanged(t, db, tree)
	before = readAPIState(t, db)
	if _, err := db.Exec(ctx, `SELECT convo.cancel_generation($1, $2)`, f.conv, c); err != nil {
		t.Fatalf("repeated cancel: %v", err)
	}
	requireAPIUnchanged(t, db, before)
	requireEqual(t, "head", headOf(t, db, f.conv), f.u)
}

// TestGenerationIllegalTransitions: an ended generation never ends again
// differently (CV006, nothing written); an exact repeat of complete returns
// the same message and writes nothing.
func TestGenerationIllegalTransitions(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)
	failed := beginGeneration(t, db, f.conv, f.u, "model-x")
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, 'boom')`, f.conv, failed)
	cancelled := beginGeneration(t, db, f.conv, f.u, "model-x")
	mustExec(t, db, `SELECT convo.cancel_generation($1, $2)`, f.conv, cancelled)
	completed := beginGeneration(t, db, f.conv, f.u, "model-x")
	parts := textParts("Sunny.")
	a := queryRow[string](t, db, `SELECT convo.complete_generation($1, $2, $3, $4, $5)::text`, f.conv, completed, parts, `{"output_tokens": 3}`, "stop")

	before := readAPIState(t, db)
	again := queryRow[string](t, db, `SELECT convo.complete_generation($1, $2, $3, $4, $5)::text`, f.conv, completed, parts, `{"output_tokens":3}`, "stop")
	requireEqual(t, "message of an exact repeat", again, a)
	requireAPIUnchanged(t, db, before)

	const (
		complete = `SELECT convo.complete_generation($1, $2, $3, $4, $5)`
		fail     = `SELECT convo.fail_generation($1, $2, $3, $4)`
		cancel   = `SELECT convo.cancel_generation($1, $2)`
	)
	runCallCases(t, db, []callCase{
		{name: "complete a failed generation", sql: complete, args: []any{f.conv, failed, parts, `{}`, nil}, code: "CV006", mentions: []string{failed}},
		{name: "complete a cancelled generation", sql: complete, args: []any{f.conv, cancelled, parts, `{}`, nil}, code: "CV006"},
		{name: "complete again with other parts", sql: complete, args: []any{f.conv, completed, textParts("Rain."), `{"output_tokens": 3}`, "stop"}, code: "CV006"},
		{name: "complete again with other usage", sql: complete, args: []any{f.conv, completed, parts, `{"output_tokens": 4}`, "stop"}, code: "CV006"},
		{name: "complete again with another finish reason", sql: complete, args: []any{f.conv, completed, parts, `{"output_tokens": 3}`, "length"}, code: "CV006"},
		{name: "fail a completed generation", sql: fail, args: []any{f.conv, completed, "boom", `{}`}, code: "CV006"},
		{name: "fail a cancelled generation", sql: fail, args: []any{f.conv, cancelled, "boom", `{}`}, code: "CV006"},
		{name: "fail again with another code", sql: fail, args: []any{f.conv, failed, "other", `{}`}, code: "CV006"},
		{name: "fail again with another error", sql: fail, args: []any{f.conv, failed, "boom", `{"x": 1}`}, code: "CV006"},
		{name: "cancel a completed generation", sql: cancel, args: []any{f.conv, completed}, code: "CV006"},
		{name: "cancel a failed generation", sql: cancel, args: []any{f.conv, failed}, code: "CV006"},
	})
	requireEqual(t, "assistant messages", queryRow[int](t, db,
		`SELECT count(*)::int FROM convo.messages WHERE conversation_id = $1 AND role = 'assistant'`, f.conv), 1)

	// A complete that fails on its parts writes nothing and leaves the
	// generation streaming.
	streaming := beginGeneration(t, db, f.conv, f.u, "model-x")
	runCallCases(t, db, []callCase{
		{name: "complete with empty parts", sql: complete, args: []any{f.conv, streaming, `[]`, `{}`, nil}, code: "CV008"},
		{name: "complete with a malformed part", sql: complete, args: []any{f.conv, streaming, `[{"type": "text", "text": 5}]`, `{}`, nil}, code: "CV008"},
		{name: "complete with a tool_result (not an assistant's part)", sql: complete, args: []any{f.conv, streaming,
			`[{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}]`, `{}`, nil}, code: "CV004"},
	})
	requireEqual(t, "state after a refused complete", readGeneration(t, db, f.conv, streaming).State, "streaming")
}

// TestGenerationDirectChanges: outside the API a generation cannot be
// inserted already ended or changed once ended (CV006), its identity never
// changes (CV006), and it is never deleted (CV005). A streaming generation
// may be inserted with a started_at of its own.
func TestGenerationDirectChanges(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)
	completed := beginGeneration(t, db, f.conv, f.u, "model-x")
	a := completeGeneration(t, db, f.conv, completed, textParts("Sunny."))
	streaming := beginGeneration(t, db, f.conv, f.u, "model-x")

	const upd = `UPDATE convo.generations SET `
	runCallCases(t, db, []callCase{
		{name: "completed to failed", code: "CV006", args: []any{completed},
			sql: upd + `state = 'failed', message_id = NULL, usage = NULL, error_code = 'x', error = '{}' WHERE id = $1`},
		{name: "completed to streaming", code: "CV006", args: []any{completed},
			sql: upd + `state = 'streaming', message_id = NULL, usage = NULL, finished_at = NULL WHERE id = $1`},
		{name: "another usage on a completed generation", code: "CV006", args: []any{completed}, sql: upd + `usage = '{"output_tokens": 1}' WHERE id = $1`},
		{name: "another finish time", code: "CV006", args: []any{completed}, sql: upd + `finished_at = finished_at + interval '1 second' WHERE id = $1`},
		{name: "another model", code: "CV006", args: []any{streaming}, sql: upd + `model = 'model-y' WHERE id = $1`},
		{name: "another prompt", code: "CV006", args: []any{streaming, f.s}, sql: upd + `prompt_message_id = $2 WHERE id = $1`},
		{name: "another params", code: "CV006", args: []any{streaming}, sql: upd + `params = '{"t": 1}' WHERE id = $1`},
		{name: "an earlier start", code: "CV006", args: []any{streaming}, sql: upd + `started_at = started_at - interval '1 hour' WHERE id = $1`},
		{name: "another head_at_begin", code: "CV006", args: []any{streaming, f.s}, sql: upd + `head_at_begin = $2 WHERE id = $1`},
		{name: "completed with a message that is not an answer to the prompt", code: "CV006", args: []any{streaming, f.s},
			sql: upd + `state = 'completed', message_id = $2, usage = '{}', finished_at = clock_timestamp() WHERE id = $1`},
		{name: "INSERT completed", code: "CV006", args: []any{f.conv, f.u, a},
			sql: `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, model, state, message_id, usage, finished_at)
			      VALUES ($1, gen_random_uuid(), $2, 'model-x', 'completed', $3, '{}', clock_timestamp())`},
		{name: "INSERT failed", code: "CV006", args: []any{f.conv, f.u},
			sql: `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, model, state, error_code, error, finished_at)
			      VALUES ($1, gen_random_uuid(), $2, 'model-x', 'failed', 'x', '{}', clock_timestamp())`},
		{name: "DELETE", code: "CV005", args: []any{streaming}, sql: `DELETE FROM convo.generations WHERE id = $1`},
		{name: "TRUNCATE", code: "CV005", sql: `TRUNCATE convo.generations`},
	})

	// A direct, legal transition of a streaming generation is allowed, and
	// the CHECKs still tie the columns to the state.
	for _, c := range []struct{ name, set string }{
		{"failed without an error code", `state = 'failed', error = '{}', finished_at = clock_timestamp()`},
		{"completed without a message", `state = 'completed', usage = '{}', finished_at = clock_timestamp()`},
		{"cancelled without finished_at", `state = 'cancelled'`},
		{"streaming with an error code", `error_code = 'x'`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := readAPIState(t, db)
			_, err := db.Exec(context.Background(), upd+c.set+` WHERE id = $1`, streaming)
			requireSQLStateIn(t, err, "23514", "CV006")
			requireAPIUnchanged(t, db, before)
		})
	}
}

// TestGenerationBadArguments: unknown conversations and generations are
// CV002, another conversation's generation or prompt CV003, NULL or
// malformed arguments CV011, and params, usage and errors over
// convo.max_detail_bytes() (and strings over convo.max_ref_length()) CV010.
// None writes anything.
func TestGenerationBadArguments(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)
	o := newGenFixture(t, db)
	g := beginGeneration(t, db, f.conv, f.u, "model-x")
	og := beginGeneration(t, db, o.conv, o.u, "model-x")
	unknown := newID()
	maxDetail := queryRow[int](t, db, `SELECT convo.max_detail_bytes()`)
	maxRef := queryRow[int](t, db, `SELECT convo.max_ref_length()`)
	over := sizedJSON(t, db, maxDetail+1, func(n int) string { return `{"note": "` + letters(n) + `"}` })
	atCap := sizedJSON(t, db, maxDetail, func(n int) string { return `{"note": "` + letters(n) + `"}` })
	parts := textParts("Sunny.")

	const (
		begin    = `SELECT convo.begin_generation($1, $2, $3, $4, $5)`
		complete = `SELECT convo.complete_generation($1, $2, $3, $4, $5)`
		fail     = `SELECT convo.fail_generation($1, $2, $3, $4)`
		cancel   = `SELECT convo.cancel_generation($1, $2)`
	)
	runCallCases(t, db, []callCase{
		{name: "begin: unknown conversation", sql: begin, args: []any{unknown, f.u, "m", `{}`, nil}, code: "CV002"},
		{name: "begin: unknown prompt", sql: begin, args: []any{f.conv, unknown, "m", `{}`, nil}, code: "CV002", mentions: []string{unknown}},
		{name: "begin: another conversation's prompt", sql: begin, args: []any{f.conv, o.u, "m", `{}`, nil}, code: "CV003", mentions: []string{o.u}},
		{name: "begin: NULL conversation", sql: begin, args: []any{nil, f.u, "m", `{}`, nil}, code: "CV011"},
		{name: "begin: NULL prompt", sql: begin, args: []any{f.conv, nil, "m", `{}`, nil}, code: "CV011"},
		{name: "begin: NULL model", sql: begin, args: []any{f.conv, f.u, nil, `{}`, nil}, code: "CV011"},
		{name: "begin: empty model", sql: begin, args: []any{f.conv, f.u, "", `{}`, nil}, code: "CV011"},
		{name: "begin: NULL params", sql: begin, args: []any{f.conv, f.u, "m", nil, nil}, code: "CV011"},
		{name: "begin: params an array", sql: begin, args: []any{f.conv, f.u, "m", `[]`, nil}, code: "CV011"},
		{name: "begin: params over the cap", sql: begin, args: []any{f.conv, f.u, "m", over, nil}, code: "CV010"},
		{name: "begin: digest over the cap", sql: begin, args: []any{f.conv, f.u, "m", `{}`, strings.Repeat("d", maxRef+1)}, code: "CV010"},
		{name: "complete: unknown conversation", sql: complete, args: []any{unknown, g, parts, `{}`, nil}, code: "CV002"},
		{name: "complete: unknown generation", sql: complete, args: []any{f.conv, unknown, parts, `{}`, nil}, code: "CV002", mentions: []string{unknown}},
		{name: "complete: another conversation's generation", sql: complete, args: []any{f.conv, og, parts, `{}`, nil}, code: "CV003", mentions: []string{og}},
		{name: "complete: NULL generation", sql: complete, args: []any{f.conv, nil, parts, `{}`, nil}, code: "CV011"},
		{name: "complete: NULL parts", sql: complete, args: []any{f.conv, g, nil, `{}`, nil}, code: "CV011"},
		{name: "complete: NULL usage", sql: complete, args: []any{f.conv, g, parts, nil, nil}, code: "CV011"},
		{name: "complete: usage an array", sql: complete, args: []any{f.conv, g, parts, `[1]`, nil}, code: "CV011"},
		{name: "complete: usage over the cap", sql: complete, args: []any{f.conv, g, parts, over, nil}, code: "CV010"},
		{name: "complete: finish reason over the cap", sql: complete, args: []any{f.conv, g, parts, `{}`, strings.Repeat("f", maxRef+1)}, code: "CV010"},
		{name: "fail: unknown generation", sql: fail, args: []any{f.conv, unknown, "boom", `{}`}, code: "CV002"},
		{name: "fail: another conversation's generation", sql: fail, args: []any{f.conv, og, "boom", `{}`}, code: "CV003"},
		{name: "fail: NULL code", sql: fail, args: []any{f.conv, g, nil, `{}`}, code: "CV011"},
		{name: "fail: empty code", sql: fail, args: []any{f.conv, g, "", `{}`}, code: "CV011"},
		{name: "fail: NULL error", sql: fail, args: []any{f.conv, g, "boom", nil}, code: "CV011"},
		{name: "fail: error over the cap", sql: fail, args: []any{f.conv, g, "boom", over}, code: "CV010"},
		{name: "fail: code over the cap", sql: fail, args: []any{f.conv, g, strings.Repeat("c", maxRef+1), `{}`}, code: "CV010"},
		{name: "cancel: unknown generation", sql: cancel, args: []any{f.conv, unknown}, code: "CV002"},
		{name: "cancel: another conversation's generation", sql: cancel, args: []any{f.conv, og}, code: "CV003"},
		{name: "cancel: NULL generation", sql: cancel, args: []any{f.conv, nil}, code: "CV011"},
		{name: "cancel: unknown conversation", sql: cancel, args: []any{unknown, g}, code: "CV002"},
	})
	requireEqual(t, "state after the refused calls", readGeneration(t, db, f.conv, g).State, "streaming")

	// Payloads of exactly the caps are accepted.
	g2 := queryRow[string](t, db, `SELECT convo.begin_generation($1, $2, 'm', $3, $4)::text`, f.conv, f.u, atCap, strings.Repeat("d", maxRef))
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, $3, $4)`, f.conv, g2, strings.Repeat("c", maxRef), atCap)
	mustExec(t, db, complete, f.conv, g, parts, atCap, strings.Repeat("f", maxRef))
}

// TestStaleGenerations: stale_generations lists a generation still
// streaming longer than convo.generation_stale_after(), and not a younger
// one nor an ended one however old. Nothing forbids a direct INSERT of a
// streaming generation with an earlier started_at, so the test backdates
// generations that way instead of waiting ten minutes.
func TestStaleGenerations(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newGenFixture(t, db)
	requireEqual(t, "generation_stale_after", queryRow[string](t, db, `SELECT convo.generation_stale_after()::text`), "00:10:00")
	insertAged := func(age string) string {
		t.Helper()
		id := newID()
		mustExec(t, db, `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, head_at_begin, model, started_at)
			VALUES ($1, $2, $3, $3, 'model-old', clock_timestamp() - $4::interval)`, f.conv, id, f.u, age)
		return id
	}
	stale := insertAged("11 minutes")
	young := insertAged("9 minutes")
	oldCompleted := insertAged("1 hour")
	oldFailed := insertAged("1 hour")
	oldCancelled := insertAged("1 hour")
	fresh := beginGeneration(t, db, f.conv, f.u, "model-x")
	a := completeGeneration(t, db, f.conv, oldCompleted, textParts("Late."))
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, 'boom')`, f.conv, oldFailed)
	mustExec(t, db, `SELECT convo.cancel_generation($1, $2)`, f.conv, oldCancelled)
	requireEqual(t, "head after completing a backdated generation", headOf(t, db, f.conv), a)

	rows, err := db.Query(context.Background(),
		`SELECT conversation_id::text, generation_id::text, model, prompt_message_id::text,
		        started_at < clock_timestamp() - convo.generation_stale_after()
		   FROM convo.stale_generations ORDER BY started_at`)
	if err != nil {
		t.Fatal(err)
	}
	type staleRow struct {
		Conv, ID, Model, Prompt string
		Old                     bool
	}
	var got []staleRow
	for rows.Next() {
		var r staleRow
		if err := rows.Scan(&r.Conv, &r.ID, &r.Model, &r.Prompt, &r.Old); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	requireSlice(t, "stale_generations", got, []staleRow{{f.conv, stale, "model-old", f.u, true}})
	for _, id := range []string{young, fresh} {
		requireEqual(t, "state of a younger generation left out", readGeneration(t, db, f.conv, id).State, "streaming")
	}

	// Once it ends, it is no longer stale.
	mustExec(t, db, `SELECT convo.cancel_generation($1, $2)`, f.conv, stale)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.stale_generations`)
}
