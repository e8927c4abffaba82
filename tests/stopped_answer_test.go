package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of a stopped or failed answer that keeps what was streamed:
// cancel_generation and fail_generation with p_parts.

// incompleteFlags returns "message_id:incomplete" for each row of
// convo.path(conv), root first, read as the application reads it.
func incompleteFlags(t testing.TB, app *pgxpool.Pool, owner, conv string) []string {
	t.Helper()
	return queryAsOwner(t, app, owner, `SELECT message_id::text || ':' || incomplete FROM convo.path($1)`, conv)
}

// TestStopKeepsWhatWasStreamed: the user presses Stop after some tokens;
// cancel_generation with them keeps them as the assistant answer, marked
// incomplete in path (and path_at), the head on it as complete_generation
// would put it, the generation cancelled and naming it; the provider
// rendering carries it; a repeat returns the same answer and writes
// nothing; and the user can continue from it (a generation whose prompt is
// the partial answer), which path shows complete.
func TestStopKeepsWhatWasStreamed(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-s", "")
	prompt := appendMsg(t, db, conv, "user", textParts("write a long poem"))
	gen := beginGeneration(t, db, conv, prompt, "model-x")
	partial := textParts("Roses are red, violets")

	var kept string
	if got := queryAsOwner(t, app, "owner-s", `SELECT convo.cancel_generation($1, $2, $3)::text`, conv, gen, partial); len(got) == 1 {
		kept = got[0]
	}
	if kept == "" {
		t.Fatal("cancel_generation with p_parts returned no message")
	}
	requireSlice(t, "path", incompleteFlags(t, app, "owner-s", conv), []string{prompt + ":false", kept + ":true"})
	requireEqual(t, "the head", headOf(t, db, conv), kept)
	g := readGeneration(t, db, conv, gen)
	if g.State != "cancelled" || g.MessageID != kept || g.Usage != "" {
		t.Fatalf("the generation: %+v, want cancelled naming %s, no usage", g, kept)
	}
	m := readMessage(t, db, conv, kept)
	if m.ParentID != prompt || m.Role != "assistant" || !strings.Contains(m.Parts, "violets") {
		t.Fatalf("the kept answer: %+v", m)
	}
	requireEqual(t, "path_at now", queryRow[string](t, db,
		`SELECT string_agg(incomplete::text, ',' ORDER BY depth) FROM convo.path_at($1, clock_timestamp())`, conv), "false,true")
	body := queryAsOwner(t, app, "owner-s", `SELECT convo.request_messages($1)::text`, conv)[0]
	if !strings.HasSuffix(body, `{"role": "assistant", "content": "Roses are red, violets"}]`) {
		t.Fatalf("the provider rendering does not end with the partial answer: %s", body)
	}

	// A repeat, with the parts or without: the same answer, nothing written.
	before := fingerprint(t, db)
	for _, sql := range []string{`SELECT convo.cancel_generation($1, $2, $3)::text`, `SELECT convo.cancel_generation($1, $2)::text`} {
		args := []any{conv, gen, partial}
		if !strings.Contains(sql, "$3") {
			args = args[:2]
		}
		if got := queryAsOwner(t, app, "owner-s", sql, args...); len(got) != 1 || got[0] != kept {
			t.Fatalf("a repeat (%s) returned %v, want %s", sql, got, kept)
		}
	}
	requireFingerprint(t, db, "the repeats", before)

	// Continue from it: the next answer's prompt is the partial answer.
	next := beginGeneration(t, db, conv, kept, "model-x")
	rest := completeGeneration(t, db, conv, next, textParts("are blue."))
	requireSlice(t, "path after continuing", incompleteFlags(t, app, "owner-s", conv),
		[]string{prompt + ":false", kept + ":true", rest + ":false"})
}

// TestFailKeepsWhatWasStreamed: the provider drops the stream; fail_generation
// with what arrived keeps it as cancel_generation does; an exact repeat is a
// no-op, other parts CV006; a kept answer to a prompt that already has one
// is a 'regenerate' sibling; a head moved since begin_generation stays.
func TestFailKeepsWhatWasStreamed(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-f", "")
	prompt := appendMsg(t, db, conv, "user", textParts("tell me a story"))
	first := completeGeneration(t, db, conv, beginGeneration(t, db, conv, prompt, "model-x"), textParts("Once upon a time."))
	gen := beginGeneration(t, db, conv, prompt, "model-x")
	// The user moves on meanwhile: the head leaves the prompt's answer.
	other := appendMsg(t, db, conv, "user", textParts("never mind"))
	partial := textParts("Long ago, in a")
	kept := queryAsOwner(t, app, "owner-f", `SELECT convo.fail_generation($1, $2, 'stream_dropped', '{"after_tokens": 6}', $3)::text`,
		conv, gen, partial)[0]
	m := readMessage(t, db, conv, kept)
	if m.ParentID != prompt || m.BranchReason != "regenerate" {
		t.Fatalf("the kept answer: %+v, want a regenerate sibling of %s", m, first)
	}
	requireEqual(t, "the head (moved on since begin)", headOf(t, db, conv), other)
	g := readGeneration(t, db, conv, gen)
	if g.State != "failed" || g.MessageID != kept || g.ErrorCode != "stream_dropped" {
		t.Fatalf("the generation: %+v", g)
	}
	requireEqual(t, "the kept answer's incomplete", queryRow[bool](t, db,
		`SELECT incomplete FROM convo.messages WHERE conversation_id = $1 AND id = $2`, conv, kept), true)

	before := fingerprint(t, db)
	again := queryAsOwner(t, app, "owner-f", `SELECT convo.fail_generation($1, $2, 'stream_dropped', '{"after_tokens": 6}', $3)::text`,
		conv, gen, partial)
	requireSlice(t, "an exact repeat", again, []string{kept})
	err := asOwner(app, "owner-f", `SELECT convo.fail_generation($1, $2, 'stream_dropped', '{"after_tokens": 6}', $3)`,
		conv, gen, textParts("Long ago, in a galaxy"))
	requireSQLState(t, err, "CV006")
	requireFingerprint(t, db, "the repeat and the refusal", before)
}

// TestWithoutPartsNothingChanges: cancel_generation and fail_generation
// without p_parts write no message and return NULL, as before.
func TestWithoutPartsNothingChanges(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-n", "")
	prompt := appendMsg(t, db, conv, "user", textParts("hello"))
	for _, sql := range []string{
		`SELECT coalesce(convo.cancel_generation($1, $2)::text, 'NULL')`,
		`SELECT coalesce(convo.fail_generation($1, $2, 'overloaded')::text, 'NULL')`,
	} {
		gen := beginGeneration(t, db, conv, prompt, "model-x")
		before := snapshotCounts(t, db)
		requireEqual(t, sql, queryRow[string](t, db, sql, conv, gen), "NULL")
		requireUnchanged(t, db, before)
		if g := readGeneration(t, db, conv, gen); g.MessageID != "" || !g.Finished {
			t.Fatalf("%s: the generation %+v", sql, g)
		}
	}
}

// TestStoppedAnswerRefusals: a partial answer with a tool call (which never
// ran) is CV008, parts that are no array CV008, another owner's
// conversation CV002, a generation that completed CV006, and keeping parts
// after a stop that kept none CV006; each writes nothing.
func TestStoppedAnswerRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-r", "")
	prompt := appendMsg(t, db, conv, "user", textParts("buy me a book"))
	streaming := beginGeneration(t, db, conv, prompt, "model-x")
	done := beginGeneration(t, db, conv, prompt, "model-x")
	completeGeneration(t, db, conv, done, textParts("Done."))
	stopped := beginGeneration(t, db, conv, prompt, "model-x")
	mustExec(t, db, `SELECT convo.cancel_generation($1, $2)`, conv, stopped)
	theirs := createConversation(t, db, "owner-other", "")
	theirPrompt := appendMsg(t, db, theirs, "user", textParts("hi"))
	theirGen := beginGeneration(t, db, theirs, theirPrompt, "model-x")
	toolUse := `[{"type": "text", "text": "Buying"}, {"type": "tool_use", "id": "toolu_1", "name": "buy", "input": {}}]`

	before := fingerprint(t, db)
	for _, c := range []struct {
		name, owner, sql string
		args             []any
		code             string
	}{
		{"a tool call in a stopped answer", "owner-r", `SELECT convo.cancel_generation($1, $2, $3)`, []any{conv, streaming, toolUse}, "CV008"},
		{"a tool call in a failed answer", "owner-r", `SELECT convo.fail_generation($1, $2, 'e', '{}', $3)`, []any{conv, streaming, toolUse}, "CV008"},
		{"parts that are no array", "owner-r", `SELECT convo.cancel_generation($1, $2, $3)`, []any{conv, streaming, `{"type": "text"}`}, "CV008"},
		{"an empty array", "owner-r", `SELECT convo.cancel_generation($1, $2, $3)`, []any{conv, streaming, `[]`}, "CV008"},
		{"another owner's conversation", "owner-r", `SELECT convo.cancel_generation($1, $2, $3)`, []any{theirs, theirGen, textParts("x")}, "CV002"},
		{"a completed generation", "owner-r", `SELECT convo.cancel_generation($1, $2, $3)`, []any{conv, done, textParts("x")}, "CV006"},
		{"parts after a stop that kept none", "owner-r", `SELECT convo.cancel_generation($1, $2, $3)`, []any{conv, stopped, textParts("x")}, "CV006"},
	} {
		err := asOwner(app, c.owner, c.sql, c.args...)
		if sqlState(err) != c.code {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	requireFingerprint(t, db, "the refused calls", before)
}

// TestIncompleteOutsideTheAPI: the marks hold for a session that writes the
// tables itself (each actor of asEachActor): a message inserted as
// incomplete is refused (CV011: only a stopped or failed generation's answer
// is), and so is a generation cancelled with a complete answer or completed
// with an incomplete one (CV006).
func TestIncompleteOutsideTheAPI(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-o", "")
	prompt := appendMsg(t, db, conv, "user", textParts("hi"))
	complete := completeGeneration(t, db, conv, beginGeneration(t, db, conv, prompt, "model-x"), textParts("Hello."))
	gen := beginGeneration(t, db, conv, prompt, "model-x")
	grantee := createGrantedRole(t, db)
	before := fingerprint(t, db)
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		ctx := context.Background()
		_, err := conn.Exec(ctx, `SELECT set_config('convo.owner_id', 'owner-o', false)`)
		if err != nil {
			t.Fatal(err)
		}
		// Placed as the tree places it (a second child of the prompt), so
		// that only the mark is wrong; the same row unmarked goes in.
		id := newID()
		insert := `INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, depth, sibling_index, branch_id, parts, incomplete)
			SELECT $1, $3, $2, 'assistant', 'regenerate', p.depth + 1, 2, $3, '[{"type": "text", "text": "x"}]', $4
			  FROM convo.messages p WHERE p.conversation_id = $1 AND p.id = $2`
		_, err = conn.Exec(ctx, insert, conv, prompt, id, true)
		requireSQLState(t, err, "CV011")
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, insert, conv, prompt, id, false); err != nil {
			t.Errorf("the same message not marked incomplete: %v", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, `UPDATE convo.generations SET state = 'cancelled', message_id = $3, finished_at = clock_timestamp()
			WHERE conversation_id = $1 AND id = $2`, conv, gen, complete)
		if sqlState(err) != "CV006" {
			t.Errorf("a generation cancelled with a complete answer: got %v, want CV006", err)
		}
	})
	requireFingerprint(t, db, "the refused writes", before)
}

// TestStoppedAnswerExportRestores: a conversation with a kept partial
// answer exports and restores with the mark; a document whose message is
// marked incomplete with no stopped generation naming it is refused (CV011).
func TestStoppedAnswerExportRestores(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	admin := loginAs(t, src, "convo_admin")
	conv := createConversation(t, src, "owner-x", "")
	prompt := appendMsg(t, src, conv, "user", textParts("hello"))
	gen := beginGeneration(t, src, conv, prompt, "model-x")
	kept := queryRow[string](t, src, `SELECT convo.cancel_generation($1, $2, $3)::text`, conv, gen, textParts("Hel"))
	doc := queryRow[string](t, admin, `SELECT convo.export_conversation($1)::text`, conv)

	noGeneration := queryRow[string](t, src, `SELECT jsonb_set($1::jsonb, '{generations}', '[]')::text`, doc)
	before := fingerprint(t, dst)
	_, err := dst.Exec(context.Background(), `SELECT convo.import_conversation('owner-x', $1::jsonb)`, noGeneration)
	requireSQLState(t, err, "CV011")
	requireFingerprint(t, dst, "the refused restore", before)

	mustExec(t, dst, `SELECT convo.import_conversation('owner-x', $1::jsonb)`, doc)
	requireEqual(t, "the restored mark", queryRow[string](t, dst,
		`SELECT string_agg(message_id::text || ':' || incomplete, ',' ORDER BY depth) FROM convo.path($1)`, conv),
		prompt+":false,"+kept+":true")
}
