package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of "The request the model saw":
// convo.request_messages renders a path as a provider's request messages,
// convo.request_digest hashes that body for begin_generation.

// renderStory is the first seed's purchase story as a path: the customer
// asks with a screenshot, the model buys (tool_use, its result), tries to
// email the receipt (an error result), the customer says to skip it, the
// model answers.
type renderStory struct {
	conv, system, ask, buy, bought, email, failed, skip, answer string
}

func buildRenderStory(t testing.TB, db *pgxpool.Pool, owner string) renderStory {
	t.Helper()
	effRegisterPurchase(t, db, "purchase_credits", "fork_args", "1 hour")
	var s renderStory
	s.conv = createConversation(t, db, owner, "You sell credits.")
	s.system = headOf(t, db, s.conv)
	s.ask = appendMsg(t, db, s.conv, "user", `[{"type": "text", "text": "Buy me 500 credits, as on this screenshot."},
		{"type": "attachment", "uri": "https://example.com/pricing.png", "media_type": "image/png"}]`)
	s.buy = appendMsg(t, db, s.conv, "assistant", `[{"type": "text", "text": "Buying 500 credits."},
		{"type": "tool_use", "id": "toolu_p1", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]`)
	s.bought = appendMsg(t, db, s.conv, "tool",
		`[{"type": "tool_result", "tool_use_id": "toolu_p1", "content": {"charge": "ch_1", "status": "succeeded"}}]`)
	s.email = appendMsg(t, db, s.conv, "assistant",
		`[{"type": "tool_use", "id": "toolu_r1", "name": "email_receipt", "input": {"charge": "ch_1"}}]`)
	s.failed = appendMsg(t, db, s.conv, "tool",
		`[{"type": "tool_result", "tool_use_id": "toolu_r1", "content": "SMTP timeout", "is_error": true}]`)
	s.skip = appendMsg(t, db, s.conv, "user", textParts("Skip the email."))
	s.answer = appendMsg(t, db, s.conv, "assistant", textParts("Done: 500 credits, charge ch_1. No receipt was emailed."))
	return s
}

// The story in Chat Completions' shape. It follows OpenAI's documented
// examples: the function-calling guide (platform.openai.com/docs/guides/
// function-calling, Chat Completions) appends the assistant message with
// its tool_calls (id, "type": "function", function.name, function.arguments
// as a JSON string; content null when the message only calls) and then one
// {"role": "tool", "tool_call_id": ..., "content": "..."} message per call,
// its content a string; the vision guide (docs/guides/images-vision) puts a
// user's image beside its text as [{"type": "text", ...}, {"type":
// "image_url", "image_url": {"url": ...}}]; the system prompt is {"role":
// "system", "content": "..."}. A result's object content is its JSON text,
// a tool input jsonb's text (keys shortest first).
const renderStoryOpenAI = `[
	{"role": "system", "content": "You sell credits."},
	{"role": "user", "content": [
		{"type": "text", "text": "Buy me 500 credits, as on this screenshot."},
		{"type": "image_url", "image_url": {"url": "https://example.com/pricing.png"}}]},
	{"role": "assistant", "content": "Buying 500 credits.", "tool_calls": [
		{"id": "toolu_p1", "type": "function",
		 "function": {"name": "purchase_credits", "arguments": "{\"currency\": \"EUR\", \"amount_minor\": 500}"}}]},
	{"role": "tool", "tool_call_id": "toolu_p1", "content": "{\"charge\": \"ch_1\", \"status\": \"succeeded\"}"},
	{"role": "assistant", "content": null, "tool_calls": [
		{"id": "toolu_r1", "type": "function", "function": {"name": "email_receipt", "arguments": "{\"charge\": \"ch_1\"}"}}]},
	{"role": "tool", "tool_call_id": "toolu_r1", "content": "SMTP timeout"},
	{"role": "user", "content": "Skip the email."},
	{"role": "assistant", "content": "Done: 500 credits, charge ch_1. No receipt was emailed."}
]`

// The story in the Messages API's shape. It follows Anthropic's documented
// examples: "Using the Messages API" (platform.claude.com/docs/en/
// build-with-claude/working-with-messages) puts the system prompt in the
// top-level "system" and alternates user and assistant turns; tool use
// ("How to implement tool use", "Handle tool calls",
// docs/en/agents-and-tools/tool-use/) answers an assistant turn of text and
// {"type": "tool_use", "id", "name", "input"} blocks with a user turn of
// {"type": "tool_result", "tool_use_id", "content"} blocks, "is_error": true
// for a failed tool, the results before any text of that turn; vision
// (docs/en/build-with-claude/vision) gives an image as {"type": "image",
// "source": {"type": "url", "url": ...}}. The error result and "Skip the
// email." are two stored messages and one user turn.
const renderStoryAnthropic = `{
	"system": "You sell credits.",
	"messages": [
		{"role": "user", "content": [
			{"type": "text", "text": "Buy me 500 credits, as on this screenshot."},
			{"type": "image", "source": {"type": "url", "url": "https://example.com/pricing.png"}}]},
		{"role": "assistant", "content": [
			{"type": "text", "text": "Buying 500 credits."},
			{"type": "tool_use", "id": "toolu_p1", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]},
		{"role": "user", "content": [
			{"type": "tool_result", "tool_use_id": "toolu_p1", "content": "{\"charge\": \"ch_1\", \"status\": \"succeeded\"}"}]},
		{"role": "assistant", "content": [
			{"type": "tool_use", "id": "toolu_r1", "name": "email_receipt", "input": {"charge": "ch_1"}}]},
		{"role": "user", "content": [
			{"type": "tool_result", "tool_use_id": "toolu_r1", "content": "SMTP timeout", "is_error": true},
			{"type": "text", "text": "Skip the email."}]},
		{"role": "assistant", "content": [
			{"type": "text", "text": "Done: 500 credits, charge ch_1. No receipt was emailed."}]}
	]
}`

// requireJSON fails unless got and want are the same JSON value.
func requireJSON(t testing.TB, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: got no JSON: %v: %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the expected body is no JSON: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		var compact bytes.Buffer
		_ = json.Compact(&compact, []byte(want))
		t.Fatalf("%s:\n got  %s\n want %s", what, got, compact.String())
	}
}

// requestBody reads convo.request_messages as the text the client receives.
func requestBody(t testing.TB, db *pgxpool.Pool, conv, msg, format string) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT convo.request_messages($1, $2, $3)`, conv, nullable(msg), format)
}

// TestRequestMessagesPurchaseStory: the story's path, rendered in both
// formats, is the hand-written body each provider documents; a path to an
// earlier message is the same body cut there; openai is the default; a
// login member of convo_app with the owner set reads the same bodies.
func TestRequestMessagesPurchaseStory(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	s := buildRenderStory(t, db, "customer-7")

	requireJSON(t, "openai", requestBody(t, db, s.conv, "", "openai"), renderStoryOpenAI)
	requireJSON(t, "anthropic", requestBody(t, db, s.conv, "", "anthropic"), renderStoryAnthropic)
	requireJSON(t, "the default format", queryRow[string](t, db, `SELECT convo.request_messages($1)`, s.conv), renderStoryOpenAI)
	requireJSON(t, "openai, the head named", requestBody(t, db, s.conv, s.answer, "openai"), renderStoryOpenAI)

	// Up to the customer's question: what the first generation was sent.
	requireJSON(t, "openai up to the question", requestBody(t, db, s.conv, s.ask, "openai"), `[
		{"role": "system", "content": "You sell credits."},
		{"role": "user", "content": [
			{"type": "text", "text": "Buy me 500 credits, as on this screenshot."},
			{"type": "image_url", "image_url": {"url": "https://example.com/pricing.png"}}]}]`)
	requireJSON(t, "anthropic up to the error result", requestBody(t, db, s.conv, s.failed, "anthropic"), `{
		"system": "You sell credits.",
		"messages": [
			{"role": "user", "content": [
				{"type": "text", "text": "Buy me 500 credits, as on this screenshot."},
				{"type": "image", "source": {"type": "url", "url": "https://example.com/pricing.png"}}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Buying 500 credits."},
				{"type": "tool_use", "id": "toolu_p1", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_p1", "content": "{\"charge\": \"ch_1\", \"status\": \"succeeded\"}"}]},
			{"role": "assistant", "content": [
				{"type": "tool_use", "id": "toolu_r1", "name": "email_receipt", "input": {"charge": "ch_1"}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_r1", "content": "SMTP timeout", "is_error": true}]}]}`)

	web := loginAs(t, db, "convo_app")
	for _, format := range []string{"openai", "anthropic"} {
		got := queryAsOwner(t, web, "customer-7", `SELECT convo.request_messages($1, NULL, $2)::text`, s.conv, format)
		requireEqual(t, "as convo_app, "+format, got[0], requestBody(t, db, s.conv, "", format))
	}
	reader := loginAs(t, db, "convo_reader")
	requireEqual(t, "as convo_reader", queryAsOwner(t, reader, "", `SELECT convo.request_digest($1)`, s.conv)[0],
		queryRow[string](t, db, `SELECT convo.request_digest($1)`, s.conv))
}

// TestRequestMessagesParts: attachments by URL and as data: URIs (an image,
// a PDF) and a user message carrying its text before a tool result, the way
// each format takes them. OpenAI's vision guide accepts a data URL in
// image_url.url; its PDF guide (docs/guides/pdf-files, Chat Completions)
// sends {"type": "file", "file": {"filename", "file_data": "data:...;base64,..."}}
// or {"file": {"file_id"}}. Anthropic's vision guide gives a base64 image
// as {"source": {"type": "base64", "media_type", "data"}}; its PDF guide
// (docs/en/build-with-claude/pdf-support) a {"type": "document"} block with
// a url or base64 source. Tool results come first in a user turn
// (Anthropic) and as tool messages ahead of the user message (OpenAI).
func TestRequestMessagesParts(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "user", `[
		{"type": "attachment", "uri": "data:image/png;base64,iVBORw0KGgo=", "media_type": "image/png"},
		{"type": "attachment", "uri": "data:application/pdf;base64,JVBERi0xLjQ=", "media_type": "application/pdf", "filename": "invoice.pdf"},
		{"type": "attachment", "uri": "https://example.com/terms.pdf", "media_type": "application/pdf"},
		{"type": "text", "text": "What is due?"}]`)
	appendMsg(t, db, conv, "assistant", `[{"type": "tool_use", "id": "toolu_x", "name": "lookup", "input": {}}]`)
	appendMsg(t, db, conv, "user", `[{"type": "text", "text": "Here it is."},
		{"type": "tool_result", "tool_use_id": "toolu_x", "content": "42 EUR"}]`)

	requireJSON(t, "openai", requestBody(t, db, conv, "", "openai"), `[
		{"role": "user", "content": [
			{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
			{"type": "file", "file": {"filename": "invoice.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjQ="}},
			{"type": "file", "file": {"file_id": "https://example.com/terms.pdf"}},
			{"type": "text", "text": "What is due?"}]},
		{"role": "assistant", "content": null, "tool_calls": [
			{"id": "toolu_x", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "toolu_x", "content": "42 EUR"},
		{"role": "user", "content": "Here it is."}]`)
	requireJSON(t, "anthropic", requestBody(t, db, conv, "", "anthropic"), `{"messages": [
		{"role": "user", "content": [
			{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
			{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
			{"type": "document", "source": {"type": "url", "url": "https://example.com/terms.pdf"}},
			{"type": "text", "text": "What is due?"}]},
		{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "lookup", "input": {}}]},
		{"role": "user", "content": [
			{"type": "tool_result", "tool_use_id": "toolu_x", "content": "42 EUR"},
			{"type": "text", "text": "Here it is."}]}]}`)

	empty := createConversation(t, db, "owner-1", "")
	requireJSON(t, "openai, no message yet", requestBody(t, db, empty, "", "openai"), `[]`)
	requireJSON(t, "anthropic, no message yet", requestBody(t, db, empty, "", "anthropic"), `{"messages": []}`)
}

// TestRequestDigest: the digest is the SHA-256 of the body's text as the
// client receives it, computed here in Go; begin_generation records it; an
// edit gives the new path another digest while the digest of the old
// prompt's path stays what was recorded, so an audit can check a reply.
func TestRequestDigest(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	s := buildRenderStory(t, db, "customer-7")
	sha := func(body string) string {
		sum := sha256.Sum256([]byte(body))
		return hex.EncodeToString(sum[:])
	}
	digest := func(msg, format string) string {
		return queryRow[string](t, db, `SELECT convo.request_digest($1, $2, $3)`, s.conv, nullable(msg), format)
	}
	for _, format := range []string{"openai", "anthropic"} {
		body := requestBody(t, db, s.conv, s.skip, format)
		requireEqual(t, format+" digest", digest(s.skip, format), sha(body))
		requireEqual(t, format+" digest is the body's jsonb text", body,
			queryRow[string](t, db, `SELECT convo.request_messages($1, $2, $3)::text`, s.conv, s.skip, format))
	}
	if digest(s.skip, "openai") == digest(s.skip, "anthropic") {
		t.Fatal("the two formats' bodies have one digest")
	}

	// The application records the digest of what it sends.
	recorded := digest(s.skip, "openai")
	gen := queryRow[string](t, db, `SELECT convo.begin_generation($1, $2, 'gpt-4o', p_request_digest => convo.request_digest($1, $2))::text`,
		s.conv, s.skip)
	requireEqual(t, "the recorded digest", queryRow[string](t, db,
		`SELECT request_digest FROM convo.generations WHERE conversation_id = $1 AND id = $2`, s.conv, gen), recorded)

	// The customer edits "Skip the email." The new path has a new digest;
	// the old prompt's path is unchanged, so the audit still matches it.
	edited := editMsg(t, db, s.conv, s.skip, textParts("Email it to billing@example.com instead."))
	if digest("", "openai") == recorded || digest(edited, "openai") == recorded {
		t.Fatal("the edited path has the digest of the path before the edit")
	}
	requireEqual(t, "the audit of the generation", queryRow[bool](t, db, `
		SELECT g.request_digest = convo.request_digest(g.conversation_id, g.prompt_message_id)
		  FROM convo.generations g WHERE g.conversation_id = $1 AND g.id = $2`, s.conv, gen), true)
}

// TestRequestRefusals: an unknown format is CV011 with a DETAIL naming the
// conversation, before anything is read; a system message holding more than
// text has no Messages API form (CV011); another owner's conversation is
// CV002, a message of another conversation CV003, as for the other
// functions; none of it writes anything.
func TestRequestRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	alice := buildRenderStory(t, db, "alice")
	alice2 := createConversation(t, db, "alice", "Another conversation.")
	bob := createConversation(t, db, "bob", "You sell credits to bob.")
	odd := createConversation(t, db, "alice", "")
	oddSystem := appendMsg(t, db, odd, "system", `[{"type": "text", "text": "Read this."},
		{"type": "attachment", "uri": "https://example.com/policy.pdf", "media_type": "application/pdf"}]`)
	web := loginAs(t, db, "convo_app")
	before := fingerprint(t, db)

	for _, fn := range []string{"request_messages", "request_digest"} {
		for _, format := range []string{"gemini", "OpenAI", ""} {
			_, err := db.Exec(context.Background(), `SELECT convo.`+fn+`($1, NULL, $2)`, alice.conv, format)
			requireSQLState(t, err, "CV011")
			if e := pgError(t, err); e.Detail != "conversation "+alice.conv {
				t.Fatalf("%s in format %q: DETAIL %q", fn, format, e.Detail)
			}
		}
	}
	_, err := db.Exec(context.Background(), `SELECT convo.request_messages($1, p_format => 'anthropic')`, odd)
	requireSQLState(t, err, "CV011")
	requireEqual(t, "DETAIL of a system attachment", pgError(t, err).Detail, "conversation "+odd+", message "+oddSystem)
	if err := asOwner(db, "", `SELECT convo.request_messages($1)`, odd); err != nil {
		t.Fatalf("the openai format carries a system message's parts: %v", err)
	}

	calls := []struct {
		name, sql string
		args      []any
		code      string
	}{
		{"bob's conversation", `SELECT convo.request_messages($1)`, []any{bob}, "CV002"},
		{"bob's conversation, digest", `SELECT convo.request_digest($1, NULL, 'anthropic')`, []any{bob}, "CV002"},
		{"bob's message in alice's conversation", `SELECT convo.request_messages($1, $2)`, []any{alice.conv, headOf(t, db, bob)}, "CV002"},
		{"an unknown conversation", `SELECT convo.request_digest($1)`, []any{newID()}, "CV002"},
		{"alice's other conversation's message", `SELECT convo.request_messages($1, $2, 'anthropic')`,
			[]any{alice.conv, headOf(t, db, alice2)}, "CV003"},
		{"an unknown format as convo_app", `SELECT convo.request_messages($1, NULL, 'claude')`, []any{alice.conv}, "CV011"},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			requireSQLState(t, asOwner(web, "alice", c.sql, c.args...), c.code)
		})
	}
	requireSQLState(t, asOwner(web, "", `SELECT convo.request_messages($1)`, alice.conv), "CV002")
	requireSQLState(t, asOwner(web, "bob", `SELECT convo.request_digest($1)`, alice.conv), "CV002")
	requireFingerprint(t, db, "the refused requests", before)

	// The read-only functions are in the documented grants of both roles.
	requireSlice(t, "grants", queryRowsAs[string](t, db, `
		SELECT grantee || ' ' || object_name FROM convo_private.documented_grants()
		 WHERE object_name LIKE 'convo.request\_%' ORDER BY 1`), []string{
		"convo_app convo.request_digest(uuid,uuid,text)", "convo_app convo.request_messages(uuid,uuid,text)",
		"convo_reader convo.request_digest(uuid,uuid,text)", "convo_reader convo.request_messages(uuid,uuid,text)",
	})
}
