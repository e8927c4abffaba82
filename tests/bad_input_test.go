package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// badInputFixture is one of everything a call can name, in one database:
// a conversation with a user and an assistant message, a pending and an
// awaiting effect, an applied one, a streaming generation, a filled receipt;
// and a second conversation, for ids of another conversation.
type badInputFixture struct {
	conv, user, assistant, gen, pending, awaiting, applied, receipt string
	otherConv, otherUser, otherGen, otherEffect                     string
}

func newBadInputFixture(t testing.TB, db *pgxpool.Pool) badInputFixture {
	t.Helper()
	effRegisterPurchase(t, db, "buy", "fork_args", "1 hour")
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
	var f badInputFixture
	f.conv = createConversation(t, db, "owner-1", "You sell credits.")
	appendMsg(t, db, f.conv, "user", textParts("Buy 500, please."))
	first := appendMsg(t, db, f.conv, "assistant", effToolUses(effBuy("toolu_a", "buy", 500)))
	f.applied = effForCall(t, db, f.conv, "toolu_a").EffectID
	effSettle(t, db, f.conv, f.applied, "ch_1")
	f.user = editMsg(t, db, f.conv, readMessage(t, db, f.conv, first).ParentID, textParts("Buy 700, please."))
	f.assistant = appendMsg(t, db, f.conv, "assistant", effToolUses(effBuy("toolu_b", "buy", 700), effBuy("toolu_c", "buy", 900)))
	f.awaiting = effForCall(t, db, f.conv, "toolu_b").EffectID
	mustExec(t, db, `SELECT convo.append_message($1, 'tool', $2)`, f.conv, effToolResults("toolu_b", "toolu_c"))
	appendMsg(t, db, f.conv, "user", textParts("And 5 more?"))
	appendMsg(t, db, f.conv, "assistant", effToolUses(effBuy("toolu_d", "buy", 5))) // a new fork point: execute
	f.pending = effForCall(t, db, f.conv, "toolu_d").EffectID
	f.gen = beginGeneration(t, db, f.conv, f.user, "model-1")
	f.receipt = beginReceipt(t, db, "owner-1", "follow-0001", "file_followup", `{}`).ID
	fillReceipt(t, db, f.receipt, `{"ticket": 1}`, `{}`)

	f.otherConv = createConversation(t, db, "owner-1", "Another conversation.")
	f.otherUser = appendMsg(t, db, f.otherConv, "user", textParts("Buy 1."))
	appendMsg(t, db, f.otherConv, "assistant", effToolUses(effBuy("toolu_o", "buy", 1)))
	f.otherEffect = effForCall(t, db, f.otherConv, "toolu_o").EffectID
	f.otherGen = beginGeneration(t, db, f.otherConv, f.otherUser, "model-1")
	return f
}

// call is one API call: the function and its arguments as SQL expressions,
// by name (positional order is the catalog's).
type call struct {
	fn   string
	args []arg
}

type arg struct {
	name, sql string
	nullable  bool // NULL is a valid value of this argument
}

func (c call) sql(nullArg string) string {
	var parts []string
	for _, a := range c.args {
		v := a.sql
		if a.name == nullArg {
			v = "NULL"
		}
		parts = append(parts, a.name+" => "+v)
	}
	return fmt.Sprintf("SELECT * FROM convo.%s(%s)", c.fn, strings.Join(parts, ", "))
}

// validCalls returns a call of every function of the API that succeeds on
// the fixture (each is checked to succeed, rolled back), with which of its
// arguments may be NULL.
func validCalls(f badInputFixture) []call {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	u := func(s string) string { return q(s) + "::uuid" }
	parts := q(textParts("Hello.")) + "::jsonb"
	return []call{
		{"create_conversation", []arg{{"p_owner_id", "'owner-1'", false}, {"p_system_prompt", "'Hi.'", true},
			{"p_metadata", `'{}'`, false}, {"p_conversation_id", "NULL", true}}},
		{"append_message", []arg{{"p_conversation_id", u(f.conv), false}, {"p_role", "'user'", false}, {"p_parts", parts, false},
			{"p_expected_head", "NULL", true}, {"p_message_id", "NULL", true}, {"p_moved_by", "'tab-1'", true}}},
		{"edit_and_resend", []arg{{"p_conversation_id", u(f.conv), false}, {"p_message_id", u(f.user), false}, {"p_parts", parts, false},
			{"p_expected_head", "NULL", true}, {"p_new_message_id", "NULL", true}, {"p_moved_by", "'tab-1'", true}}},
		{"regenerate", []arg{{"p_conversation_id", u(f.conv), false}, {"p_message_id", u(f.assistant), false}, {"p_parts", parts, false},
			{"p_expected_head", "NULL", true}, {"p_new_message_id", "NULL", true}, {"p_moved_by", "'tab-1'", true}}},
		{"move_head", []arg{{"p_conversation_id", u(f.conv), false}, {"p_message_id", u(f.user), false}, {"p_reason", "'switch'", false},
			{"p_expected_head", "NULL", true}, {"p_moved_by", "'tab-1'", true}}},
		{"path", []arg{{"p_conversation_id", u(f.conv), false}}},
		{"path_at", []arg{{"p_conversation_id", u(f.conv), false}, {"p_at", "clock_timestamp()", false}}},
		{"head_at", []arg{{"p_conversation_id", u(f.conv), false}, {"p_at", "clock_timestamp()", false}}},
		{"head_history", []arg{{"p_conversation_id", u(f.conv), false}}},
		{"alternatives", []arg{{"p_conversation_id", u(f.conv), false}, {"p_message_id", u(f.user), false}}},
		{"begin_generation", []arg{{"p_conversation_id", u(f.conv), false}, {"p_prompt_message_id", u(f.user), false},
			{"p_model", "'model-1'", false}, {"p_params", `'{}'`, false}, {"p_request_digest", "NULL", true}, {"p_generation_id", "NULL", true}}},
		{"complete_generation", []arg{{"p_conversation_id", u(f.conv), false}, {"p_generation_id", u(f.gen), false},
			{"p_parts", parts, false}, {"p_usage", `'{}'`, false}, {"p_finish_reason", "'stop'", true}}},
		{"fail_generation", []arg{{"p_conversation_id", u(f.conv), false}, {"p_generation_id", u(f.gen), false},
			{"p_error_code", "'overloaded'", false}, {"p_error", `'{}'`, false}, {"p_parts", "NULL", true}}},
		{"cancel_generation", []arg{{"p_conversation_id", u(f.conv), false}, {"p_generation_id", u(f.gen), false},
			{"p_parts", "NULL", true}}},
		{"register_tool", []arg{{"p_name", "'lookup'", false}, {"p_effectful", "false", false}, {"p_args_schema", `'{"type": "object"}'`, false},
			{"p_idempotency_scope", "'tool_call'", false}, {"p_deadline", "'20 seconds'", false},
			{"p_amount_arg", "NULL", true}, {"p_currency_arg", "NULL", true}}},
		{"effect_for_call", []arg{{"p_conversation_id", u(f.conv), false}, {"p_tool_call_id", "'toolu_b'", false}}},
		{"settle_effect", []arg{{"p_conversation_id", u(f.conv), false}, {"p_effect_id", u(f.pending), false}, {"p_state", "'applied'", false},
			{"p_external_ref", "'ch_2'", false}, {"p_http_status", "200", true}, {"p_error_code", "NULL", true}, {"p_evidence", `'{}'`, false}}},
		{"compensate_effect", []arg{{"p_conversation_id", u(f.conv), false}, {"p_effect_id", u(f.applied), false},
			{"p_compensated_by", "'re_1'", false}, {"p_evidence", `'{}'`, false}}},
		{"confirm_effect", []arg{{"p_conversation_id", u(f.conv), false}, {"p_effect_id", u(f.awaiting), false}, {"p_confirmed_by", "'alice'", false}}},
		{"decline_effect", []arg{{"p_conversation_id", u(f.conv), false}, {"p_effect_id", u(f.awaiting), false}, {"p_declined_by", "'alice'", false}}},
		{"begin_receipt", []arg{{"p_owner_id", "'owner-1'", false}, {"p_idempotency_key", "'follow-0002'", false},
			{"p_tool_name", "'file_followup'", false}, {"p_request", `'{}'`, false}}},
		{"fill_receipt", []arg{{"p_receipt_id", u(f.receipt), false}, {"p_arguments", `'{"ticket": 1}'`, false}, {"p_expected", `'{}'`, false}}},
		{"apply_receipt", []arg{{"p_receipt_id", u(f.receipt), false}, {"p_result_ref", "'fu_1'", false}, {"p_http_status", "201", false}}},
		{"fail_receipt", []arg{{"p_receipt_id", u(f.receipt), false}, {"p_http_status", "500", false}, {"p_error_code", "'boom'", false}}},
		{"expire_receipts", []arg{{"p_now", "clock_timestamp()", false}}},
		{"args_errors", []arg{{"p_schema", `'{"type": "object"}'`, false}, {"p_value", `'{}'`, false}, {"p_path", "'$'", false}}},
		{"erase_conversation", []arg{{"p_conversation_id", u(f.conv), false}, {"p_reason", "'asked'", false}}},
		{"erase_owner", []arg{{"p_owner_id", "'owner-1'", false}, {"p_reason", "'asked'", false}}},
		{"request_messages", []arg{{"p_conversation_id", u(f.conv), false}, {"p_message_id", "NULL", true}, {"p_format", "'openai'", false}}},
		{"request_digest", []arg{{"p_conversation_id", u(f.conv), false}, {"p_message_id", u(f.user), true}, {"p_format", "'anthropic'", false}}},
		{"import_chatgpt", []arg{{"p_owner_id", "'owner-1'", false}, {"p_conversation", `'{"mapping": {}}'`, false}}},
		{"import_openwebui", []arg{{"p_owner_id", "'owner-1'", false}, {"p_chat", `'{"history": {"messages": {}}}'`, false}}},
		{"import_librechat", []arg{{"p_owner_id", "'owner-1'", false}, {"p_conversation", `'{"messages": []}'`, false}}},
		{"export_conversation", []arg{{"p_conversation_id", u(f.conv), false}}},
		{"import_conversation", []arg{{"p_owner_id", "'owner-1'", false},
			{"p_export", "convo.export_conversation(" + u(f.conv) + ")", false}}}, // a repeat: the same id
		{"conversations", []arg{{"p_owner_id", "'owner-1'", false}, {"p_limit", "50", false}, {"p_before", "NULL", true},
			{"p_archived", "false", false}, {"p_before_id", "NULL", true}}},
		{"set_title", []arg{{"p_conversation_id", u(f.conv), false}, {"p_title", "'Credits'", true}}},
		{"archive_conversation", []arg{{"p_conversation_id", u(f.conv), false}}},
		{"unarchive_conversation", []arg{{"p_conversation_id", u(f.conv), false}}},
		{"delete_conversation", []arg{{"p_conversation_id", u(f.conv), false}}},
		{"restore_deleted_conversation", []arg{{"p_conversation_id", u(f.conv), false}}},
		{"erase_due", nil},
		{"deletion_retention", nil},
		{"set_deletion_retention", []arg{{"p_period", "'7 days'", false}}},
		{"search_conversations", []arg{{"p_owner_id", "'owner-1'", false}, {"p_query", "'credits'", false},
			{"p_limit", "20", false}, {"p_before_rank", "NULL", true}, {"p_before_conversation_id", "NULL", true},
			{"p_before_message_id", "NULL", true}}},
		{"search_config", nil},
		{"set_search_config", []arg{{"p_config", "'english'", false}}},
		{"live_updates", nil},
		{"set_live_updates", []arg{{"p_on", "true", false}}},
		{"import_history", []arg{{"p_format", "'chatgpt'", false}, {"p_owner_id", "'owner-1'", false},
			{"p_source", `'{"mapping": {}}'`, false}}},
		{"self_check", nil},
		{"max_message_bytes", nil}, {"max_part_bytes", nil}, {"max_tool_input_bytes", nil}, {"max_metadata_bytes", nil},
		{"max_request_bytes", nil}, {"max_detail_bytes", nil}, {"max_ref_length", nil}, {"generation_stale_after", nil},
	}
}

// TestEveryArgumentRefusesNull: every function of the API, called as it
// succeeds but with NULL for one argument that needs a value, raises CV011
// and writes nothing. The list of calls must name every function and every
// argument of the catalog, so a new one cannot go untried.
func TestEveryArgumentRefusesNull(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newBadInputFixture(t, db)
	calls := validCalls(f)
	ctx := context.Background()

	// The list covers the catalog exactly.
	var listed []string
	for _, c := range calls {
		sig := c.fn + "("
		var names []string
		for _, a := range c.args {
			names = append(names, a.name)
		}
		listed = append(listed, sig+strings.Join(names, ",")+")")
	}
	sort.Strings(listed)
	requireSlice(t, "API functions and their arguments", listed, queryRowsAs[string](t, db, `
		SELECT p.proname || '(' || coalesce(array_to_string(p.proargnames[1:p.pronargs], ','), '') || ')'
		  FROM pg_proc p WHERE p.pronamespace = 'convo'::regnamespace ORDER BY 1`))

	for _, c := range calls {
		// The call as given succeeds (then is rolled back): a refusal below
		// is the NULL's doing.
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, c.sql("")); err != nil {
				return err
			}
			return errRollback
		})
		if err != errRollback {
			t.Fatalf("%s as given: %v", c.sql(""), err)
		}
		for _, a := range c.args {
			if a.nullable {
				continue
			}
			t.Run(c.fn+"/"+a.name, func(t *testing.T) {
				before := fingerprint(t, db)
				_, err := db.Exec(ctx, c.sql(a.name))
				requireSQLState(t, err, "CV011")
				requireFingerprint(t, db, "the refused call", before)
			})
		}
	}
}

// errRollback makes pgx.BeginFunc roll back a transaction that succeeded.
var errRollback = fmt.Errorf("roll back")

// TestBadInputEverywhere: unknown and foreign ids, wrong roles, malformed
// and oversized JSON, invalid states and reused keys, each with the
// contract's SQLSTATE and nothing written.
func TestBadInputEverywhere(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	f := newBadInputFixture(t, db)
	unknown := newID()
	big := func(n int) string { return strings.Repeat("x", n) }
	parts := textParts("Hello.")
	cases := []callCase{
		// Unknown ids: CV002.
		{name: "append to an unknown conversation", sql: `SELECT convo.append_message($1, 'user', $2)`, args: []any{unknown, parts}, code: "CV002"},
		{name: "path of an unknown conversation", sql: `SELECT * FROM convo.path($1)`, args: []any{unknown}, code: "CV002"},
		{name: "edit an unknown message", sql: `SELECT convo.edit_and_resend($1, $2, $3)`, args: []any{f.conv, unknown, parts}, code: "CV002"},
		{name: "move to an unknown message", sql: `SELECT convo.move_head($1, $2)`, args: []any{f.conv, unknown}, code: "CV002"},
		{name: "alternatives of an unknown message", sql: `SELECT * FROM convo.alternatives($1, $2)`, args: []any{f.conv, unknown}, code: "CV002"},
		{name: "generation on an unknown prompt", sql: `SELECT convo.begin_generation($1, $2, 'm')`, args: []any{f.conv, unknown}, code: "CV002"},
		{name: "complete an unknown generation", sql: `SELECT convo.complete_generation($1, $2, $3)`, args: []any{f.conv, unknown, parts}, code: "CV002"},
		{name: "an unknown tool call", sql: `SELECT * FROM convo.effect_for_call($1, 'toolu_zz')`, args: []any{f.conv}, code: "CV002"},
		{name: "settle an unknown effect", sql: `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x')`, args: []any{f.conv, unknown}, code: "CV002"},
		{name: "fill an unknown receipt", sql: `SELECT * FROM convo.fill_receipt($1, '{}')`, args: []any{unknown}, code: "CV002"},
		{name: "erase an unknown conversation", sql: `SELECT * FROM convo.erase_conversation($1, 'asked')`, args: []any{unknown}, code: "CV002"},
		{name: "the request of an unknown conversation", sql: `SELECT convo.request_messages($1)`, args: []any{unknown}, code: "CV002"},
		{name: "the request up to an unknown message", sql: `SELECT convo.request_digest($1, $2)`, args: []any{f.conv, unknown}, code: "CV002"},
		// Ids of another conversation: CV003.
		{name: "the request up to another conversation's message", sql: `SELECT convo.request_messages($1, $2, 'anthropic')`,
			args: []any{f.conv, f.otherUser}, code: "CV003"},
		{name: "edit another conversation's message", sql: `SELECT convo.edit_and_resend($1, $2, $3)`, args: []any{f.conv, f.otherUser, parts}, code: "CV003"},
		{name: "move to another conversation's message", sql: `SELECT convo.move_head($1, $2)`, args: []any{f.conv, f.otherUser}, code: "CV003"},
		{name: "another conversation's generation", sql: `SELECT convo.cancel_generation($1, $2)`, args: []any{f.conv, f.otherGen}, code: "CV003"},
		{name: "another conversation's effect", sql: `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x')`, args: []any{f.conv, f.otherEffect}, code: "CV003"},
		{name: "another conversation's tool call", sql: `SELECT * FROM convo.effect_for_call($1, 'toolu_o')`, args: []any{f.conv}, code: "CV003"},
		// Wrong roles: CV004.
		{name: "edit an assistant message", sql: `SELECT convo.edit_and_resend($1, $2, $3)`, args: []any{f.conv, f.assistant, parts}, code: "CV004"},
		{name: "regenerate a user message", sql: `SELECT convo.regenerate($1, $2, $3)`, args: []any{f.conv, f.user, parts}, code: "CV004"},
		{name: "tool_use in a user message", sql: `SELECT convo.append_message($1, 'user', $2)`, args: []any{f.conv, effToolUses(effBuy("toolu_u", "buy", 1))}, code: "CV004"},
		{name: "an unknown role", sql: `SELECT convo.append_message($1, 'robot', $2)`, args: []any{f.conv, parts}, code: "CV011"},
		// Malformed JSON: CV008 for parts, CV011 for other arguments.
		{name: "parts not an array", sql: `SELECT convo.append_message($1, 'user', '{"type": "text"}')`, args: []any{f.conv}, code: "CV008"},
		{name: "an empty parts array", sql: `SELECT convo.append_message($1, 'user', '[]')`, args: []any{f.conv}, code: "CV008"},
		{name: "a part without a type", sql: `SELECT convo.append_message($1, 'user', '[{"text": "x"}]')`, args: []any{f.conv}, code: "CV008"},
		{name: "a part of an unknown type", sql: `SELECT convo.append_message($1, 'user', '[{"type": "video"}]')`, args: []any{f.conv}, code: "CV008"},
		{name: "a tool_result without its tool_use", sql: `SELECT convo.append_message($1, 'tool', $2)`, args: []any{f.conv, effToolResults("toolu_none")}, code: "CV008"},
		{name: "a repeated tool call id", sql: `SELECT convo.append_message($1, 'assistant', $2)`, args: []any{f.conv, effToolUses(effBuy("toolu_a", "buy", 1))}, code: "CV008"},
		{name: "metadata not an object", sql: `SELECT convo.create_conversation('owner-1', NULL, '[]')`, code: "CV011"},
		{name: "params not an object", sql: `SELECT convo.begin_generation($1, $2, 'm', '[]')`, args: []any{f.conv, f.user}, code: "CV011"},
		{name: "usage not an object", sql: `SELECT convo.complete_generation($1, $2, $3, '[]')`, args: []any{f.conv, f.gen, parts}, code: "CV011"},
		{name: "expected values not an object", sql: `SELECT * FROM convo.fill_receipt($1, '{}', '[]')`, args: []any{f.receipt}, code: "CV011"},
		{name: "a tool schema with an unknown keyword", sql: `SELECT convo.register_tool('lookup', false, '{"format": "email"}')`, code: "CV011"},
		// Oversized JSON and text: CV010.
		{name: "a message over 4 MiB", sql: `SELECT convo.append_message($1, 'user', $2)`, args: []any{f.conv, textParts(big(4<<20 + 1))}, code: "CV010"},
		{name: "a part over 1 MiB", sql: `SELECT convo.append_message($1, 'user', $2)`, args: []any{f.conv, textParts(big(1<<20 + 1))}, code: "CV010"},
		{name: "a tool input over 256 KiB", sql: `SELECT convo.append_message($1, 'assistant', $2)`,
			args: []any{f.conv, effToolUses(effCall{ID: "toolu_big", Name: "lookup", Input: map[string]any{"q": big(256<<10 + 1)}})}, code: "CV010"},
		{name: "metadata over 256 KiB", sql: `SELECT convo.create_conversation('owner-1', NULL, $1::jsonb)`,
			args: []any{fmt.Sprintf(`{"n": %q}`, big(256<<10+1))}, code: "CV010"},
		{name: "params over 256 KiB", sql: `SELECT convo.begin_generation($1, $2, 'm', $3::jsonb)`,
			args: []any{f.conv, f.user, fmt.Sprintf(`{"n": %q}`, big(256<<10+1))}, code: "CV010"},
		{name: "evidence over 256 KiB", sql: `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x', p_evidence => $3::jsonb)`,
			args: []any{f.conv, f.pending, fmt.Sprintf(`{"n": %q}`, big(256<<10+1))}, code: "CV010"},
		{name: "a receipt request over 256 KiB", sql: `SELECT * FROM convo.begin_receipt('owner-1', 'follow-0003', 'file_followup', $1::jsonb)`,
			args: []any{fmt.Sprintf(`{"n": %q}`, big(256<<10+1))}, code: "CV010"},
		{name: "an external reference over the cap", sql: `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3)`,
			args: []any{f.conv, f.pending, big(1025)}, code: "CV010"},
		// Invalid states: CV006.
		{name: "settle an effect awaiting confirmation", sql: `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_9')`,
			args: []any{f.conv, f.awaiting}, code: "CV006"},
		{name: "confirm a pending effect", sql: `SELECT convo.confirm_effect($1, $2, 'alice')`, args: []any{f.conv, f.pending}, code: "CV006"},
		{name: "compensate a pending effect", sql: `SELECT convo.compensate_effect($1, $2, 're_9')`, args: []any{f.conv, f.pending}, code: "CV006"},
		{name: "settle an applied effect otherwise", sql: `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x')`,
			args: []any{f.conv, f.applied}, code: "CV006"},
		{name: "fill a filled receipt otherwise", sql: `SELECT * FROM convo.fill_receipt($1, '{"ticket": 2}')`, args: []any{f.receipt}, code: "CV006"},
		{name: "apply with a 5xx status", sql: `SELECT convo.apply_receipt($1, 'fu_1', 500)`, args: []any{f.receipt}, code: "CV011"},
		{name: "fail with a 2xx status", sql: `SELECT convo.fail_receipt($1, 201, 'x')`, args: []any{f.receipt}, code: "CV011"},
		{name: "a request in an unknown format", sql: `SELECT convo.request_messages($1, p_format => 'gemini')`, args: []any{f.conv}, code: "CV011"},
		{name: "a digest in an unknown format", sql: `SELECT convo.request_digest($1, $2, 'OpenAI')`, args: []any{f.conv, f.user}, code: "CV011"},
		{name: "a head-move reason reserved for the database", sql: `SELECT convo.move_head($1, $2, 'direct_update')`, args: []any{f.conv, f.user}, code: "CV011"},
		// Reused keys: CV009.
		{name: "a message id reused for other parts", sql: `SELECT convo.append_message($1, 'user', $2, p_message_id => $3)`,
			args: []any{f.conv, textParts("Other."), f.user}, code: "CV009"},
		{name: "a generation id reused for another prompt", sql: `SELECT convo.begin_generation($1, $2, 'm', p_generation_id => $3)`,
			args: []any{f.conv, f.assistant, f.gen}, code: "CV009"},
		{name: "a receipt key reused for another request", sql: `SELECT * FROM convo.begin_receipt('owner-1', 'follow-0001', 'file_followup', '{"x": 1}')`,
			code: "CV009"},
		{name: "a receipt key too short", sql: `SELECT * FROM convo.begin_receipt('owner-1', 'short', 'file_followup')`, code: "CV011"},
		// Stale heads: CV001.
		{name: "append with a stale expected head", sql: `SELECT convo.append_message($1, 'user', $2, p_expected_head => $3)`,
			args: []any{f.conv, parts, f.user}, code: "CV001"},
	}
	for i := range cases {
		c := cases[i]
		t.Run(c.name, func(t *testing.T) {
			before := fingerprint(t, db)
			_, err := db.Exec(context.Background(), c.sql, c.args...)
			requireSQLState(t, err, c.code)
			requireFingerprint(t, db, "the refused call", before)
		})
	}
}
