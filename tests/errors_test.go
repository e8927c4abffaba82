package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errFixture is the data the bad-input cases aim at.
//
// Conversation conv (owner-a): S (system) -> U1, edited into U1e -> A1 (text
// and tool call toolu_A1) -> A2 (tool call toolu_A2), the head. A2 is an
// assistant message under an assistant message so that a tool message
// appended at the head has toolu_A2 in its parent and toolu_A1 in its
// grandparent.
//
// Conversation other (owner-b): OS -> OU -> OA (tool call toolu_B1) -> OT.
type errFixture struct {
	conv, s, u1, u1e, a1, a2 string
	other, ou, oa, ot        string
}

const (
	fxPrompt   = "You are helpful."
	fxMetadata = `{"k": "v"}`
	fxU1Text   = "What is the weather?"
	fxU1eText  = "What is the weather in Paris?"
	fxA2Parts  = `[{"type": "tool_use", "id": "toolu_A2", "name": "forecast", "input": {"days": 3}}]`
)

func newErrFixture(t testing.TB, db *pgxpool.Pool) errFixture {
	t.Helper()
	var f errFixture
	f.conv = newID()
	mustExec(t, db, `SELECT convo.create_conversation('owner-a', $1, $2, $3)`, fxPrompt, fxMetadata, f.conv)
	f.s = headOf(t, db, f.conv)
	f.u1 = appendMsg(t, db, f.conv, "user", textParts(fxU1Text))
	f.u1e = editMsg(t, db, f.conv, f.u1, textParts(fxU1eText))
	f.a1 = appendMsg(t, db, f.conv, "assistant",
		`[{"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "toolu_A1", "name": "weather", "input": {"city": "Paris"}}]`)
	f.a2 = appendMsg(t, db, f.conv, "assistant", fxA2Parts)

	f.other = createConversation(t, db, "owner-b", "You are elsewhere.")
	f.ou = appendMsg(t, db, f.other, "user", textParts("Hi."))
	f.oa = appendMsg(t, db, f.other, "assistant", `[{"type": "tool_use", "id": "toolu_B1", "name": "weather", "input": {}}]`)
	f.ot = appendMsg(t, db, f.other, "tool", `[{"type": "tool_result", "tool_use_id": "toolu_B1", "content": "sunny"}]`)
	return f
}

// errCase is one call that must fail with code, write nothing, and (if
// detail is set) name detail in the error's DETAIL.
type errCase struct {
	name   string
	sql    string
	args   []any
	code   string
	detail string
}

// runErrorCases runs each case in autocommit and checks its SQLSTATE and
// that the row counts of every tree table and every head are unchanged.
func runErrorCases(t *testing.T, db *pgxpool.Pool, cases []errCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshotCounts(t, db)
			_, err := db.Exec(context.Background(), c.sql, c.args...)
			requireSQLState(t, err, c.code)
			if c.detail != "" {
				if d := pgError(t, err).Detail; !strings.Contains(d, c.detail) {
					t.Errorf("DETAIL %q does not name %s", d, c.detail)
				}
			}
			requireUnchanged(t, db, before)
		})
	}
}

const (
	sqlAppend       = `SELECT convo.append_message($1, $2, $3)`
	sqlAppendAs     = `SELECT convo.append_message($1, $2, $3, p_message_id => $4)`
	sqlAppendCAS    = `SELECT convo.append_message($1, $2, $3, p_expected_head => $4)`
	sqlEdit         = `SELECT convo.edit_and_resend($1, $2, $3)`
	sqlEditAs       = `SELECT convo.edit_and_resend($1, $2, $3, p_new_message_id => $4)`
	sqlEditCAS      = `SELECT convo.edit_and_resend($1, $2, $3, p_expected_head => $4)`
	sqlRegenerate   = `SELECT convo.regenerate($1, $2, $3)`
	sqlRegenerateAs = `SELECT convo.regenerate($1, $2, $3, p_new_message_id => $4)`
	sqlRegenCAS     = `SELECT convo.regenerate($1, $2, $3, p_expected_head => $4)`
	sqlMoveHead     = `SELECT convo.move_head($1, $2)`
	sqlMoveHeadWhy  = `SELECT convo.move_head($1, $2, $3)`
	sqlMoveHeadCAS  = `SELECT convo.move_head($1, $2, p_expected_head => $3)`
	sqlPath         = `SELECT count(*) FROM convo.path($1)`
	sqlPathAt       = `SELECT count(*) FROM convo.path_at($1, $2)`
	sqlHeadAt       = `SELECT convo.head_at($1, $2)`
	sqlHeadHistory  = `SELECT count(*) FROM convo.head_history($1)`
	sqlAlternatives = `SELECT count(*) FROM convo.alternatives($1, $2)`
	sqlCreate       = `SELECT convo.create_conversation($1, $2, $3, $4)`
)

var someText = textParts("Fine.")

// TestErrorsNotFound: an unknown conversation or message is CV002 in every
// function, and the DETAIL names it.
func TestErrorsNotFound(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	ghost, nomsg, now := newID(), newID(), time.Now()
	runErrorCases(t, db, []errCase{
		{"append_message to an unknown conversation", sqlAppend, []any{ghost, "user", someText}, "CV002", ghost},
		{"edit_and_resend in an unknown conversation", sqlEdit, []any{ghost, f.u1e, someText}, "CV002", ghost},
		{"regenerate in an unknown conversation", sqlRegenerate, []any{ghost, f.a2, someText}, "CV002", ghost},
		{"move_head in an unknown conversation", sqlMoveHead, []any{ghost, f.a1}, "CV002", ghost},
		{"path of an unknown conversation", sqlPath, []any{ghost}, "CV002", ghost},
		{"path_at of an unknown conversation", sqlPathAt, []any{ghost, now}, "CV002", ghost},
		{"head_at of an unknown conversation", sqlHeadAt, []any{ghost, now}, "CV002", ghost},
		{"head_history of an unknown conversation", sqlHeadHistory, []any{ghost}, "CV002", ghost},
		{"alternatives in an unknown conversation", sqlAlternatives, []any{ghost, f.u1}, "CV002", ghost},
		{"edit_and_resend of an unknown message", sqlEdit, []any{f.conv, nomsg, someText}, "CV002", nomsg},
		{"regenerate of an unknown message", sqlRegenerate, []any{f.conv, nomsg, someText}, "CV002", nomsg},
		{"move_head to an unknown message", sqlMoveHead, []any{f.conv, nomsg}, "CV002", nomsg},
		{"alternatives of an unknown message", sqlAlternatives, []any{f.conv, nomsg}, "CV002", nomsg},
	})
}

// TestErrorsWrongConversation: a message of another conversation is CV003.
func TestErrorsWrongConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	runErrorCases(t, db, []errCase{
		{"edit_and_resend of another conversation's message", sqlEdit, []any{f.conv, f.ou, someText}, "CV003", f.ou},
		{"regenerate of another conversation's message", sqlRegenerate, []any{f.conv, f.oa, someText}, "CV003", f.oa},
		{"move_head to another conversation's message", sqlMoveHead, []any{f.conv, f.ou}, "CV003", f.ou},
		{"alternatives of another conversation's message", sqlAlternatives, []any{f.conv, f.ou}, "CV003", f.ou},
	})
}

// TestErrorsWrongRole: operations and parts that do not fit a role are CV004.
func TestErrorsWrongRole(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	toolUse := `[{"type": "tool_use", "id": "toolu_new", "name": "weather", "input": {}}]`
	// toolu_A2 is in the head's parts, so only the role is wrong.
	toolResult := `[{"type": "tool_result", "tool_use_id": "toolu_A2", "content": "sunny"}]`
	runErrorCases(t, db, []errCase{
		{"edit_and_resend of an assistant message", sqlEdit, []any{f.conv, f.a1, someText}, "CV004", f.a1},
		{"edit_and_resend of the system message", sqlEdit, []any{f.conv, f.s, someText}, "CV004", f.s},
		{"regenerate of a user message", sqlRegenerate, []any{f.conv, f.u1e, someText}, "CV004", f.u1e},
		{"regenerate of the system message", sqlRegenerate, []any{f.conv, f.s, someText}, "CV004", f.s},
		{"tool_use in a user message", sqlAppend, []any{f.conv, "user", toolUse}, "CV004", "toolu_new"},
		{"tool_use in a tool message", sqlAppend, []any{f.conv, "tool", toolUse}, "CV004", "toolu_new"},
		{"tool_use in an edited user message", sqlEdit, []any{f.conv, f.u1e, toolUse}, "CV004", "toolu_new"},
		{"tool_result in an assistant message", sqlAppend, []any{f.conv, "assistant", toolResult}, "CV004", ""},
		{"tool_result in a system message", sqlAppend, []any{f.conv, "system", toolResult}, "CV004", ""},
	})
}

// TestErrorsInvalidParts: malformed parts are CV008, whichever part is bad
// and whichever function writes them. Cases with a good part before the bad
// one prove the half-written message is undone.
func TestErrorsInvalidParts(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	good := `{"type": "text", "text": "fine"}`
	user := func(name, parts string) errCase {
		return errCase{name, sqlAppend, []any{f.conv, "user", parts}, "CV008", ""}
	}
	assistant := func(name, parts string) errCase {
		return errCase{name, sqlAppend, []any{f.conv, "assistant", parts}, "CV008", ""}
	}
	tool := func(name, parts string) errCase { // appended under A2, which has toolu_A2
		return errCase{name, sqlAppend, []any{f.conv, "tool", parts}, "CV008", ""}
	}
	runErrorCases(t, db, []errCase{
		user("parts is an object", good),
		user("parts is a string", `"hello"`),
		user("parts is a number", `42`),
		user("parts is JSON null", `null`),
		user("parts is an empty array", `[]`),
		user("an element is a string", `[`+good+`, "hello"]`),
		user("an element is a number", `[1]`),
		user("an element is an array", `[[`+good+`]]`),
		user("an element is null", `[null]`),
		user("a part without type", `[{"text": "hi"}]`),
		user("a part whose type is not a string", `[{"type": 1, "text": "hi"}]`),
		user("an unknown part type", `[`+good+`, {"type": "video", "uri": "s3://b/k"}]`),
		user("text without text", `[{"type": "text"}]`),
		user("text whose text is a number", `[{"type": "text", "text": 42}]`),
		user("text whose text is null", `[{"type": "text", "text": null}]`),
		user("attachment without uri", `[{"type": "attachment", "media_type": "image/png"}]`),
		user("attachment without media_type", `[{"type": "attachment", "uri": "s3://b/k"}]`),
		user("attachment with an empty uri", `[{"type": "attachment", "uri": "", "media_type": "image/png"}]`),
		assistant("tool_use without id", `[{"type": "tool_use", "name": "weather", "input": {}}]`),
		assistant("tool_use with an empty id", `[{"type": "tool_use", "id": "", "name": "weather", "input": {}}]`),
		assistant("tool_use whose id is a number", `[{"type": "tool_use", "id": 7, "name": "weather", "input": {}}]`),
		assistant("tool_use without name", `[{"type": "tool_use", "id": "toolu_x", "input": {}}]`),
		assistant("tool_use without input", `[{"type": "tool_use", "id": "toolu_x", "name": "weather"}]`),
		assistant("tool_use whose input is a string", `[{"type": "tool_use", "id": "toolu_x", "name": "weather", "input": "Paris"}]`),
		assistant("tool_use whose input is an array", `[{"type": "tool_use", "id": "toolu_x", "name": "weather", "input": []}]`),
		tool("tool_result without tool_use_id", `[{"type": "tool_result", "content": "sunny"}]`),
		tool("tool_result whose tool_use_id is a number", `[{"type": "tool_result", "tool_use_id": 7, "content": "sunny"}]`),
		tool("tool_result without content", `[{"type": "tool_result", "tool_use_id": "toolu_A2"}]`),
		tool("tool_result whose is_error is a string", `[{"type": "tool_result", "tool_use_id": "toolu_A2", "content": "x", "is_error": "no"}]`),
		tool("tool_result whose is_error is null", `[{"type": "tool_result", "tool_use_id": "toolu_A2", "content": "x", "is_error": null}]`),
		tool("tool_result naming a tool_use of the grandparent", `[{"type": "tool_result", "tool_use_id": "toolu_A1", "content": "x"}]`),
		tool("tool_result naming a tool_use that does not exist", `[{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]`),
		tool("tool_result naming a tool_use of another conversation", `[{"type": "tool_result", "tool_use_id": "toolu_B1", "content": "x"}]`),
		tool("the second tool_result is unmatched", `[{"type": "tool_result", "tool_use_id": "toolu_A2", "content": "x"},
			{"type": "tool_result", "tool_use_id": "toolu_A1", "content": "y"}]`),
		{"a user tool_result naming a tool_use of the grandparent", sqlAppend, []any{f.conv, "user",
			`[{"type": "tool_result", "tool_use_id": "toolu_A1", "content": "x"}]`}, "CV008", ""},
		assistant("a tool call id used by another message of the conversation",
			`[{"type": "tool_use", "id": "toolu_A1", "name": "weather", "input": {}}]`),
		assistant("a tool call id twice in one message",
			`[{"type": "tool_use", "id": "toolu_dup", "name": "weather", "input": {}},
			  {"type": "tool_use", "id": "toolu_dup", "name": "weather", "input": {}}]`),
		{"a regenerated message reusing the tool call id it replaces", sqlRegenerate, []any{f.conv, f.a2, fxA2Parts}, "CV008", ""},
		{"edit_and_resend with an empty array", sqlEdit, []any{f.conv, f.u1e, `[]`}, "CV008", ""},
		{"edit_and_resend with a text part without text", sqlEdit, []any{f.conv, f.u1e, `[{"type": "text"}]`}, "CV008", ""},
		{"regenerate with an object", sqlRegenerate, []any{f.conv, f.a2, good}, "CV008", ""},
	})
}

// TestSameToolCallIDInAnotherConversation: tool call ids are unique per
// conversation, not globally.
func TestSameToolCallIDInAnotherConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	id := appendMsg(t, db, f.other, "assistant", `[{"type": "tool_use", "id": "toolu_A1", "name": "weather", "input": {}}]`)
	requireCount(t, db, 2, `SELECT count(*) FROM convo.message_parts WHERE type = 'tool_use' AND tool_call_id = 'toolu_A1'`)
	requireCount(t, db, 1, `SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND message_id = $2 AND tool_call_id = 'toolu_A1'`, f.other, id)
}

// TestErrorsIdempotencyConflict: a client id reused for a different request
// is CV009.
func TestErrorsIdempotencyConflict(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	runErrorCases(t, db, []errCase{
		{"append_message: same id, other parts", sqlAppendAs, []any{f.conv, "user", textParts("Something else."), f.u1}, "CV009", f.u1},
		{"append_message: same id, other role", sqlAppendAs, []any{f.conv, "assistant", textParts(fxU1Text), f.u1}, "CV009", f.u1},
		{"edit_and_resend: same id, other parts", sqlEditAs, []any{f.conv, f.u1, textParts("Something else."), f.u1e}, "CV009", f.u1e},
		{"edit_and_resend: an appended message's id", sqlEditAs, []any{f.conv, f.u1, textParts("x"), f.a1}, "CV009", f.a1},
		{"regenerate: same id, other original", sqlRegenerateAs, []any{f.conv, f.a2, textParts("x"), f.a1}, "CV009", f.a1},
		{"create_conversation: other owner", sqlCreate, []any{"owner-x", fxPrompt, fxMetadata, f.conv}, "CV009", f.conv},
		{"create_conversation: other metadata", sqlCreate, []any{"owner-a", fxPrompt, `{"k": "w"}`, f.conv}, "CV009", f.conv},
		{"create_conversation: other system prompt", sqlCreate, []any{"owner-a", "You are rude.", fxMetadata, f.conv}, "CV009", f.conv},
		{"create_conversation: no system prompt", sqlCreate, []any{"owner-a", nil, fxMetadata, f.conv}, "CV009", f.conv},
	})
}

// sizeCaps are the caps as the database reports them.
type sizeCaps struct {
	message, part, toolInput, metadata int
}

func readSizeCaps(t testing.TB, db *pgxpool.Pool) sizeCaps {
	t.Helper()
	c := sizeCaps{
		message:   queryRow[int](t, db, `SELECT convo.max_message_bytes()`),
		part:      queryRow[int](t, db, `SELECT convo.max_part_bytes()`),
		toolInput: queryRow[int](t, db, `SELECT convo.max_tool_input_bytes()`),
		metadata:  queryRow[int](t, db, `SELECT convo.max_metadata_bytes()`),
	}
	// The contract documents the values.
	requireEqual(t, "caps", c, sizeCaps{message: 4 << 20, part: 1 << 20, toolInput: 256 << 10, metadata: 256 << 10})
	return c
}

// Payload builders: each returns a document of exactly size bytes in
// jsonb's text form (checked against the database).

// partsOfSize is a message of text parts, each well under the part cap.
func partsOfSize(t testing.TB, db *pgxpool.Pool, size int) string {
	t.Helper()
	const chunk = 1_000_000
	var full []string
	for range (size - 1) / (chunk + 100) {
		full = append(full, `{"type": "text", "text": "`+letters(chunk)+`"}`)
	}
	return sizedJSON(t, db, size, func(n int) string {
		return `[` + strings.Join(append(full, `{"type": "text", "text": "`+letters(n)+`"}`), `, `) + `]`
	})
}

// textPartOfSize is one text part.
func textPartOfSize(t testing.TB, db *pgxpool.Pool, size int) string {
	t.Helper()
	return sizedJSON(t, db, size, func(n int) string { return `{"type": "text", "text": "` + letters(n) + `"}` })
}

// objectOfSize is a JSON object (a tool input, metadata).
func objectOfSize(t testing.TB, db *pgxpool.Pool, size int) string {
	t.Helper()
	return sizedJSON(t, db, size, func(n int) string { return `{"data": "` + letters(n) + `"}` })
}

func toolUseWithInput(id, input string) string {
	return `[{"type": "tool_use", "id": "` + id + `", "name": "upload", "input": ` + input + `}]`
}

// TestErrorsPayloadTooLarge: one byte over each cap is CV010.
func TestErrorsPayloadTooLarge(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	caps := readSizeCaps(t, db)
	runErrorCases(t, db, []errCase{
		{"a message over max_message_bytes", sqlAppend, []any{f.conv, "user", partsOfSize(t, db, caps.message+1)}, "CV010", ""},
		{"one part over max_part_bytes", sqlAppend, []any{f.conv, "user", `[` + textPartOfSize(t, db, caps.part+1) + `]`}, "CV010", ""},
		{"an edit with one part over max_part_bytes", sqlEdit, []any{f.conv, f.u1e, `[` + textPartOfSize(t, db, caps.part+1) + `]`}, "CV010", ""},
		{"a tool input over max_tool_input_bytes", sqlAppend, []any{f.conv, "assistant",
			toolUseWithInput("toolu_big", objectOfSize(t, db, caps.toolInput+1))}, "CV010", "toolu_big"},
		{"metadata over max_metadata_bytes", sqlCreate, []any{"owner-c", nil, objectOfSize(t, db, caps.metadata+1), nil}, "CV010", ""},
	})
}

// TestSizeCapsAllowPayloadsAtTheCap: a payload of exactly the cap is
// accepted and stored whole.
func TestSizeCapsAllowPayloadsAtTheCap(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	caps := readSizeCaps(t, db)

	msg := appendMsg(t, db, f.conv, "user", partsOfSize(t, db, caps.message))
	requireEqual(t, "stored message size", queryRow[int](t, db,
		`SELECT octet_length(jsonb_agg(body ORDER BY ordinal)::text) FROM convo.message_parts
		  WHERE conversation_id = $1 AND message_id = $2`, f.conv, msg), caps.message)

	part := appendMsg(t, db, f.conv, "user", `[`+textPartOfSize(t, db, caps.part)+`]`)
	requireEqual(t, "stored part size", queryRow[int](t, db,
		`SELECT octet_length(body::text) FROM convo.message_parts WHERE conversation_id = $1 AND message_id = $2`, f.conv, part), caps.part)

	tool := appendMsg(t, db, f.conv, "assistant", toolUseWithInput("toolu_cap", objectOfSize(t, db, caps.toolInput)))
	requireEqual(t, "stored tool input size", queryRow[int](t, db,
		`SELECT octet_length((body -> 'input')::text) FROM convo.message_parts WHERE conversation_id = $1 AND message_id = $2`, f.conv, tool), caps.toolInput)

	conv := queryRow[string](t, db, `SELECT convo.create_conversation('owner-c', NULL, $1)::text`, objectOfSize(t, db, caps.metadata))
	requireEqual(t, "stored metadata size", queryRow[int](t, db,
		`SELECT octet_length(metadata::text) FROM convo.conversations WHERE id = $1`, conv), caps.metadata)
}

// TestErrorsStaleHead: p_expected_head that is no longer the head is CV001
// for every write, and the DETAIL names the current head.
func TestErrorsStaleHead(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	runErrorCases(t, db, []errCase{
		{"append_message", sqlAppendCAS, []any{f.conv, "user", someText, f.a1}, "CV001", f.a2},
		{"append_message expecting another conversation's message", sqlAppendCAS, []any{f.conv, "user", someText, f.ot}, "CV001", f.a2},
		{"edit_and_resend", sqlEditCAS, []any{f.conv, f.u1e, someText, f.a1}, "CV001", f.a2},
		{"regenerate", sqlRegenCAS, []any{f.conv, f.a2, someText, f.a1}, "CV001", f.a2},
		{"move_head", sqlMoveHeadCAS, []any{f.conv, f.s, f.a1}, "CV001", f.a2},
	})
}

// TestErrorsInvalidArgument: NULL where a value is required, an unknown
// role, a bad reason or metadata that is not an object is CV011.
func TestErrorsInvalidArgument(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	now := time.Now()
	reason := func(name string, r any) errCase {
		return errCase{"move_head reason " + name, sqlMoveHeadWhy, []any{f.conv, f.a1, r}, "CV011", ""}
	}
	runErrorCases(t, db, []errCase{
		{"create_conversation with a NULL owner", sqlCreate, []any{nil, nil, `{}`, nil}, "CV011", ""},
		{"create_conversation with an empty owner", sqlCreate, []any{"", nil, `{}`, nil}, "CV011", ""},
		{"create_conversation with NULL metadata", sqlCreate, []any{"owner-c", nil, nil, nil}, "CV011", ""},
		{"create_conversation with array metadata", sqlCreate, []any{"owner-c", nil, `[]`, nil}, "CV011", ""},
		{"create_conversation with string metadata", sqlCreate, []any{"owner-c", nil, `"x"`, nil}, "CV011", ""},
		{"create_conversation with number metadata", sqlCreate, []any{"owner-c", nil, `1`, nil}, "CV011", ""},
		{"append_message with a NULL role", sqlAppend, []any{f.conv, nil, someText}, "CV011", ""},
		{"append_message with an unknown role", sqlAppend, []any{f.conv, "robot", someText}, "CV011", ""},
		{"append_message with an empty role", sqlAppend, []any{f.conv, "", someText}, "CV011", ""},
		{"append_message with a capitalised role", sqlAppend, []any{f.conv, "User", someText}, "CV011", ""},
		{"append_message with NULL parts", sqlAppend, []any{f.conv, "user", nil}, "CV011", ""},
		{"edit_and_resend with NULL parts", sqlEdit, []any{f.conv, f.u1e, nil}, "CV011", ""},
		{"regenerate with NULL parts", sqlRegenerate, []any{f.conv, f.a2, nil}, "CV011", ""},
		{"append_message with a NULL conversation", sqlAppend, []any{nil, "user", someText}, "CV011", ""},
		{"edit_and_resend with a NULL conversation", sqlEdit, []any{nil, f.u1e, someText}, "CV011", ""},
		{"regenerate with a NULL conversation", sqlRegenerate, []any{nil, f.a2, someText}, "CV011", ""},
		{"move_head with a NULL conversation", sqlMoveHead, []any{nil, f.a1}, "CV011", ""},
		{"path with a NULL conversation", sqlPath, []any{nil}, "CV011", ""},
		{"path_at with a NULL conversation", sqlPathAt, []any{nil, now}, "CV011", ""},
		{"head_at with a NULL conversation", sqlHeadAt, []any{nil, now}, "CV011", ""},
		{"head_history with a NULL conversation", sqlHeadHistory, []any{nil}, "CV011", ""},
		{"alternatives with a NULL conversation", sqlAlternatives, []any{nil, f.u1}, "CV011", ""},
		{"edit_and_resend with a NULL message", sqlEdit, []any{f.conv, nil, someText}, "CV011", ""},
		{"regenerate with a NULL message", sqlRegenerate, []any{f.conv, nil, someText}, "CV011", ""},
		{"move_head with a NULL message", sqlMoveHead, []any{f.conv, nil}, "CV011", ""},
		{"alternatives with a NULL message", sqlAlternatives, []any{f.conv, nil}, "CV011", ""},
		{"head_at with a NULL instant", sqlHeadAt, []any{f.conv, nil}, "CV011", ""},
		{"path_at with a NULL instant", sqlPathAt, []any{f.conv, nil}, "CV011", ""},
		reason("NULL", nil),
		reason("empty", ""),
		reason("with a space", "Has Space"),
		reason("in capitals", "Switch"),
		reason("starting with a digit", "1st"),
		reason("of 64 characters", strings.Repeat("a", 64)),
		reason("direct_update (reserved)", "direct_update"),
		reason("create (reserved)", "create"),
	})
	// The longest allowed reason is fine (63 characters).
	before := len(readHeadHistory(t, db, f.conv))
	mustExec(t, db, sqlMoveHeadWhy, f.conv, f.a1, strings.Repeat("a", 63))
	requireEqual(t, "head-log rows after a 63-character reason", len(readHeadHistory(t, db, f.conv)), before+1)
}

// TestFailedCallInTransactionWritesNothing: a call that fails inside an
// explicit transaction, after writing a message row and a good part, leaves
// nothing: the transaction is aborted, no later statement runs, and COMMIT
// rolls everything back (no savepoint involved).
func TestFailedCallInTransactionWritesNothing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newErrFixture(t, db)
	ctx := context.Background()
	before := snapshotCounts(t, db)

	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var ok string
	if err := tx.QueryRow(ctx, `SELECT convo.append_message($1, 'user', $2)::text`, f.conv, someText).Scan(&ok); err != nil {
		t.Fatalf("a good append in the transaction: %v", err)
	}
	_, err = tx.Exec(ctx, sqlAppend, f.conv, "assistant",
		`[{"type": "text", "text": "fine"}, {"type": "tool_use", "id": "toolu_A1", "name": "weather", "input": {}}]`)
	requireSQLState(t, err, "CV008")
	_, err = tx.Exec(ctx, `SELECT 1`)
	requireSQLState(t, err, "25P02") // in_failed_sql_transaction
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("COMMIT of the failed transaction: got %v, want %v", err, pgx.ErrTxCommitRollback)
	}
	requireUnchanged(t, db, before)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1 AND id = $2`, f.conv, ok)
}
