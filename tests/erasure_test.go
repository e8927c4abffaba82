package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// erasureColumns classifies every text, jsonb and array column of every
// table of the package: "redacted" (erasure empties it) or why it is kept.
// A column added later that is in neither list fails
// TestEveryColumnIsClassifiedForErasure: decide what erasure does with it.
var erasureColumns = map[string]string{
	"conversations.owner_id":          "id",
	"conversations.metadata":          "redacted",
	"conversations.title":             "redacted",
	"conversation_changes.field":      "shape",
	"conversation_changes.old_value":  "redacted (a title's; an archive state's is shape, which redact_row keeps)",
	"conversation_changes.new_value":  "redacted (a title's; an archive state's is shape, which redact_row keeps)",
	"conversation_changes.changed_by": "who",
	"messages.role":                   "shape",
	"messages.branch_reason":          "shape",
	"messages.parts":                  "redacted",
	"keyed_parts.type":                "shape",
	"keyed_parts.tool_call_id":        "id",
	"keyed_parts.tool_name":           "id (the allowlist's name)",
	"conversation_head_log.moved_by":  "who (a tab, service or staff name; no end-user content)",
	"conversation_head_log.reason":    "shape",
	"generations.model":               "shape",
	"generations.params":              "redacted",
	"generations.request_digest":      "redacted",
	"generations.state":               "shape",
	"generations.usage":               "redacted",
	"generations.finish_reason":       "shape",
	"generations.error_code":          "shape",
	"generations.error":               "redacted",
	"tools.name":                      "id",
	"tools.args_schema":               "the allowlist, no conversation's content",
	"tools.idempotency_scope":         "shape",
	"tools.amount_arg":                "shape",
	"tools.currency_arg":              "shape",
	"tools.registered_by":             "who",
	"effect_transitions.from_state":   "shape",
	"effect_transitions.to_state":     "shape",
	"effect_transitions.changes":      "shape",
	"tool_effects.tool_name":          "id",
	"tool_effects.idempotency_key":    "id (a digest, the key the outside service knows)",
	"tool_effects.scope_key":          "id (a digest)",
	"tool_effects.state":              "shape",
	"tool_effects.arguments":          "redacted",
	"tool_effects.currency":           "amount",
	"tool_effects.confirmed_by":       "who",
	"tool_effects.external_ref":       "external reference",
	"tool_effects.error_code":         "shape",
	"tool_effects.compensated_by":     "external reference",
	"tool_effect_calls.tool_call_id":  "id",
	"tool_effect_calls.decision":      "shape",
	"tool_effect_events.from_state":   "shape",
	"tool_effect_events.to_state":     "shape",
	"tool_effect_events.actor":        "who",
	"tool_effect_events.evidence":     "redacted",
	"tool_receipts.owner_id":          "id",
	"tool_receipts.idempotency_key":   "id",
	"tool_receipts.tool_name":         "id",
	"tool_receipts.request":           "redacted",
	"tool_receipts.request_digest":    "redacted",
	"tool_receipts.arguments":         "redacted",
	"tool_receipts.expected":          "redacted",
	"tool_receipts.status":            "shape",
	"tool_receipts.error_code":        "shape",
	"tool_receipts.result_ref":        "external reference",
	"erasures.owner_id":               "id",
	"owner_holds.owner_id":            "id",
	"settings.set_by":                 "who",
	"settings.search_config":          "shape (a setting)",
	"erasures.reason":                 "the record of the erasure",
	"erasures.erased_by":              "who",
	"erasure_places.owner_id":         "id",
	"owner_erasures.owner_id":         "id",
	"owner_erasures.reason":           "the record of the erasure",
	"owner_erasures.erased_by":        "who",
	"erasure_places.place":            "shape",
	"import_origins.source":           "shape (the format)",
	"import_origins.node_key":         "id (the source's node id)",
	"import_origins.node":             "redacted",
	"imports.owner_id":                "id",
	"imports.format":                  "shape (the format)",
	"imports.source_key":              "redacted (a source's own id, or a digest of its content)",
	"imports.digest":                  "redacted",
	"imports.imported_by":             "who",
	"tool_effect_calls.tool_name":     "id (the allowlist's name)",
}

// contentColumns lists every column of a text-like, jsonb or array type in
// every table of pgconvo's schemas, from the catalog, as "table.column".
func contentColumns(t testing.TB, db *pgxpool.Pool) []string {
	t.Helper()
	return queryRowsAs[string](t, db, `
		SELECT c.relname || '.' || a.attname
		  FROM pg_attribute a
		  JOIN pg_class c ON c.oid = a.attrelid
		  JOIN pg_type ty ON ty.oid = a.atttypid
		 WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND c.relkind IN ('r', 'p')
		   AND a.attnum > 0 AND NOT a.attisdropped
		   AND (ty.typcategory IN ('S', 'A') OR ty.typname IN ('json', 'jsonb'))
		 ORDER BY 1`)
}

// markerPlaces returns "table.column" for every content column of the
// package that holds marker anywhere in its text.
func markerPlaces(t testing.TB, db *pgxpool.Pool, marker string) []string {
	t.Helper()
	var out []string
	for _, tc := range contentColumns(t, db) {
		table, column, _ := strings.Cut(tc, ".")
		qualified := queryRow[string](t, db, `SELECT c.oid::regclass::text FROM pg_class c
			WHERE c.relname = $1 AND c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)`, table)
		n := queryRow[int64](t, db, fmt.Sprintf(`SELECT count(*) FROM %s WHERE strpos(%s::text, $1) > 0`,
			qualified, pgx.Identifier{column}.Sanitize()), marker)
		if n > 0 {
			out = append(out, tc)
		}
	}
	return out
}

// TestEveryColumnIsClassifiedForErasure: every content column of every
// table is either redacted by erasure or kept for a stated reason.
func TestEveryColumnIsClassifiedForErasure(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, c := range contentColumns(t, db) {
		if _, ok := erasureColumns[c]; !ok {
			t.Errorf("column %s is neither redacted by erasure nor kept for a reason: classify it in erasureColumns "+
				"(and redact it in convo_private.redact_row if it holds content)", c)
		}
	}
}

// erasureStory writes one owner's conversation with a marker in every kind
// of content the package stores: the system prompt, text, tool inputs,
// tool results, attachment URIs, metadata, generation params, request
// digest, usage and error detail, effect arguments, settlement and
// compensation evidence, and a receipt's request, arguments and expected
// values. It returns the conversation, the first user message and the
// effect.
func erasureStory(t testing.TB, db *pgxpool.Pool, owner, marker string) (conv, user, effect string) {
	t.Helper()
	conv = queryRow[string](t, db, `SELECT convo.create_conversation($1, $2, $3)::text`,
		owner, "You help "+marker+".", fmt.Sprintf(`{"note": %q}`, marker))
	user = appendMsg(t, db, conv, "user", fmt.Sprintf(`[{"type": "text", "text": "I am %s"},
		{"type": "attachment", "uri": "s3://bucket/%s.png", "media_type": "image/png", "caption": %q}]`, marker, marker, marker))
	gen := queryRow[string](t, db, `SELECT convo.begin_generation($1, $2, 'model-1', $3, $4)::text`,
		conv, user, fmt.Sprintf(`{"system": %q}`, marker), "digest-"+marker)
	calls := effToolUses(effCall{ID: owner + "_note", Name: "note", Input: map[string]any{"text": marker}},
		effCall{ID: owner + "_lookup", Name: "lookup", Input: map[string]any{"q": marker}})
	mustExec(t, db, `SELECT convo.complete_generation($1, $2, $3, $4)`, conv, gen, calls, fmt.Sprintf(`{"note": %q}`, marker))
	effect = effForCall(t, db, conv, owner+"_note").EffectID
	mustExec(t, db, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_1', p_evidence => $3)`,
		conv, effect, fmt.Sprintf(`{"proof": %q}`, marker))
	appendMsg(t, db, conv, "tool", fmt.Sprintf(`[{"type": "tool_result", "tool_use_id": "%s_note", "content": %q},
		{"type": "tool_result", "tool_use_id": "%s_lookup", "content": {"hits": [%q]}, "is_error": false}]`,
		owner, marker, owner, marker))
	failed := queryRow[string](t, db, `SELECT convo.begin_generation($1, $2, 'model-1')::text`, conv, user)
	mustExec(t, db, `SELECT convo.fail_generation($1, $2, 'overloaded', $3)`, conv, failed, fmt.Sprintf(`{"msg": %q}`, marker))
	mustExec(t, db, `SELECT convo.compensate_effect($1, $2, 're_1', $3)`, conv, effect, fmt.Sprintf(`{"refund": %q}`, marker))
	editMsg(t, db, conv, user, textParts("Forget what I said, "+marker+"."))
	receipt := beginReceipt(t, db, owner, "follow-"+owner+"-0001", "file_followup", fmt.Sprintf(`{"ticket": %q}`, marker)).ID
	fillReceipt(t, db, receipt, fmt.Sprintf(`{"ticket": %q}`, marker), fmt.Sprintf(`{"ticket": %q}`, marker))
	mustExec(t, db, `SELECT convo.apply_receipt($1, 'fu_1')`, receipt)
	return conv, user, effect
}

// erasureTools registers the tools erasureStory calls.
func erasureTools(t testing.TB, db *pgxpool.Pool) {
	t.Helper()
	registerTestTool(t, db, "note", true, `{"type": "object"}`)
	registerTestTool(t, db, "lookup", false, `{"type": "object"}`)
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
}

// conversationView is what the read functions answer about a conversation,
// as JSON text, with or without the parts.
func conversationView(t testing.TB, db *pgxpool.Pool, conv, user string, withParts bool) string {
	t.Helper()
	path := `SELECT depth, message_id, parent_id, role, branch_reason, created_at, sibling_index, sibling_count`
	if withParts {
		path += `, parts`
	}
	return queryRow[string](t, db, `SELECT jsonb_build_object(
		'path', (SELECT jsonb_agg(to_jsonb(p) ORDER BY p.depth) FROM (`+path+` FROM convo.path($1)) p),
		'history', (SELECT jsonb_agg(to_jsonb(h) ORDER BY h.seq) FROM convo.head_history($1) h),
		'alternatives', (SELECT jsonb_agg(to_jsonb(a) ORDER BY a.created_at) FROM convo.alternatives($1, $2) a),
		'orphaned', (SELECT jsonb_agg(to_jsonb(o)) FROM convo.orphaned_applied_effects o WHERE o.conversation_id = $1),
		'effects', (SELECT jsonb_agg(jsonb_build_object('id', id, 'state', state, 'key', idempotency_key,
		                   'ref', external_ref, 'amount', amount_minor, 'currency', currency, 'settled', settled_at,
		                   'compensated_by', compensated_by) ORDER BY id) FROM convo.tool_effects WHERE conversation_id = $1),
		'events', (SELECT jsonb_agg(jsonb_build_object('effect', effect_id, 'from', from_state, 'to', to_state, 'actor', actor, 'at', at)
		                   ORDER BY seq) FROM convo.tool_effect_events WHERE conversation_id = $1),
		'generations', (SELECT jsonb_agg(jsonb_build_object('id', id, 'state', state, 'model', model, 'message', message_id,
		                   'error_code', error_code) ORDER BY id) FROM convo.generations WHERE conversation_id = $1)
		)::text`, conv, user)
}

// TestErasureReachesEveryCopy plants a marker in every kind of content the
// package stores, for two owners; erases one owner; then scans every
// content column of every table, found from the catalog: the marker is
// nowhere, the other owner's is untouched, and path, head_history,
// alternatives, orphaned_applied_effects and the ledger answer as before
// but for the content. Erased parts keep their type and ids.
func TestErasureReachesEveryCopy(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	erasureTools(t, db)
	marker := "MARK" + strings.ReplaceAll(newID(), "-", "")
	other := "KEEP" + strings.ReplaceAll(newID(), "-", "")
	conv, user, _ := erasureStory(t, db, "alice", marker)
	erasureStory(t, db, "bob", other)
	planted := markerPlaces(t, db, marker)
	for _, c := range []string{"messages.parts", "conversations.metadata", "generations.params",
		"generations.request_digest", "generations.usage", "generations.error", "tool_effects.arguments",
		"tool_effect_events.evidence", "tool_receipts.request", "tool_receipts.arguments", "tool_receipts.expected"} {
		if !strings.Contains(strings.Join(planted, " "), c) {
			t.Fatalf("the story planted no marker in %s (found in %v)", c, planted)
		}
	}
	before := conversationView(t, db, conv, user, false)
	partsBefore := queryRowsAs[string](t, db, `SELECT m.id || ' ' || (SELECT string_agg(coalesce(p ->> 'type', '') || '/'
		|| coalesce(p ->> 'id', '') || '/' || coalesce(p ->> 'tool_use_id', '') || '/' || coalesce(p ->> 'name', ''), ',' ORDER BY n)
		FROM jsonb_array_elements(m.parts) WITH ORDINALITY AS e (p, n)) FROM convo.messages m WHERE m.conversation_id = $1 ORDER BY m.id`, conv)

	admin := loginAs(t, db, "convo_admin")
	got := queryAsOwner(t, admin, "", `SELECT place || '=' || rows_redacted FROM convo.erase_owner('alice', 'GDPR request 42')`)
	requireSlice(t, "rows redacted per place", got, []string{"conversations=1", "generations=2",
		"messages=5", "tool_effect_events=2", "tool_effects=1", "tool_receipts=1"})

	requireSlice(t, "places still holding the erased owner's marker", markerPlaces(t, db, marker), []string{})
	if kept := markerPlaces(t, db, other); len(kept) < 10 {
		t.Fatalf("the other owner's content was touched: its marker is left only in %v", kept)
	}
	requireEqual(t, "path, history, alternatives, orphaned effects and ledger but for the content",
		conversationView(t, db, conv, user, false), before)
	requireSlice(t, "parts' types and ids", queryRowsAs[string](t, db, `SELECT m.id || ' ' || (SELECT string_agg(coalesce(p ->> 'type', '') || '/'
		|| coalesce(p ->> 'id', '') || '/' || coalesce(p ->> 'tool_use_id', '') || '/' || coalesce(p ->> 'name', ''), ',' ORDER BY n)
		FROM jsonb_array_elements(m.parts) WITH ORDINALITY AS e (p, n)) FROM convo.messages m WHERE m.conversation_id = $1 ORDER BY m.id`, conv),
		partsBefore)
	requireEqual(t, "parts without \"erased\": true", queryRow[int64](t, db, `
		SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND body -> 'erased' IS DISTINCT FROM 'true'`, conv), int64(0))
	requireEqual(t, "self_check after erasure", failingChecks(t, db), "")

	// The record: who, when, why, rows per place; the repeat is recorded too.
	requireEqual(t, "erasures recorded", queryRow[string](t, db, `
		SELECT string_agg(e.what || ' by ' || (e.erased_by = $1)::text || ': ' || e.reason, '; ' ORDER BY e.n)
		  FROM (SELECT 1 AS n, conversation_id::text AS what, erased_by, reason FROM convo.erasures WHERE owner_id = 'alice'
		        UNION ALL
		        SELECT 2, 'receipts', erased_by, reason FROM convo.owner_erasures WHERE owner_id = 'alice') e`,
		admin.Config().ConnConfig.User),
		conv+" by true: GDPR request 42; receipts by true: GDPR request 42")
	before2 := fingerprint(t, db)
	requireSlice(t, "a repeat erasure's rows", queryAsOwner(t, admin, "",
		`SELECT place FROM convo.erase_conversation($1, 'asked again')`, conv), []string{})
	after2 := fingerprint(t, db)
	for table, b := range before2 {
		if table != "convo.erasures" && after2[table] != b {
			t.Errorf("the repeat erasure changed %s", table)
		}
	}
	requireEqual(t, "erasures after the repeat", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.erasures WHERE conversation_id = $1`, conv), int64(2))
}

// TestErasureIsTheOnlyWayContentChanges: erasure needs a reason (CV011), a
// conversation that exists (CV002), and convo_admin (convo_app: 42501); a
// role holding every table privilege cannot record an erasure nor redact
// (CV005); even a superuser's UPDATE that is not exactly the redaction, or
// that comes without an erasure of that very conversation recorded in the
// same transaction, is CV005. Nothing is written by any of them.
func TestErasureIsTheOnlyWayContentChanges(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	erasureTools(t, db)
	conv, _, _ := erasureStory(t, db, "alice", "MARK-"+newID())
	otherConv, _, _ := erasureStory(t, db, "bob", "MARK-"+newID())
	admin := loginAs(t, db, "convo_admin")
	web := loginAs(t, db, "convo_app")
	grantee := createGrantedRole(t, db)
	before := fingerprint(t, db)
	ctx := context.Background()

	for _, c := range []struct {
		name, sql string
		args      []any
		code      string
	}{
		{"no reason", `SELECT * FROM convo.erase_conversation($1, NULL)`, []any{conv}, "CV011"},
		{"empty reason", `SELECT * FROM convo.erase_conversation($1, '  ')`, []any{conv}, "CV011"},
		{"unknown conversation", `SELECT * FROM convo.erase_conversation($1, 'why')`, []any{newID()}, "CV002"},
		{"no conversation", `SELECT * FROM convo.erase_conversation(NULL, 'why')`, nil, "CV011"},
		{"owner without reason", `SELECT * FROM convo.erase_owner('alice', '')`, nil, "CV011"},
		{"no owner", `SELECT * FROM convo.erase_owner(NULL, 'why')`, nil, "CV011"},
		{"a reason over the cap", `SELECT * FROM convo.erase_owner('alice', repeat('x', 2000))`, nil, "CV010"},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireSQLState(t, asOwner(admin, "", c.sql, c.args...), c.code)
		})
	}
	t.Run("convo_app", func(t *testing.T) {
		requireSQLState(t, asOwner(web, "alice", `SELECT * FROM convo.erase_conversation($1, 'why')`, conv), "42501")
		requireSQLState(t, asOwner(web, "alice", `SELECT * FROM convo.erase_owner('alice', 'why')`), "42501")
		requireSQLState(t, asOwner(web, "alice", `SELECT * FROM convo_private.erase_content('alice', $1, 'why')`, conv), "42501")
	})
	t.Run("a role with every table privilege", func(t *testing.T) {
		conn := dedicatedConn(t, db)
		if _, err := conn.Exec(ctx, `SET ROLE `+pgx.Identifier{grantee}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Exec(ctx, `INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
			VALUES ('alice', gen_random_uuid(), $1, 'why')`, conv)
		requireSQLState(t, err, "CV005")
		_, err = conn.Exec(ctx, `UPDATE convo.messages SET parts = '[{"type": "text", "text": "", "erased": true}]' WHERE conversation_id = $1`, conv)
		requireSQLState(t, err, "CV005")
		_, err = conn.Exec(ctx, `UPDATE convo.conversations SET metadata = '{}' WHERE id = $1`, conv)
		requireSQLState(t, err, "CV005")
	})
	t.Run("superuser: the exact redaction without a recorded erasure", func(t *testing.T) {
		_, err := db.Exec(ctx, `UPDATE convo.message_parts SET body = convo_private.redact_part(body) WHERE conversation_id = $1`, conv)
		requireSQLState(t, err, "CV005")
		_, err = db.Exec(ctx, `UPDATE convo.tool_effects SET arguments = '{}' WHERE conversation_id = $1`, conv)
		requireSQLState(t, err, "CV006")
	})
	t.Run("superuser: an erasure of another conversation recorded", func(t *testing.T) {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
				VALUES ('bob', gen_random_uuid(), $1, 'why')`, otherConv); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE convo.message_parts SET body = convo_private.redact_part(body) WHERE conversation_id = $1`, conv)
			return err
		})
		requireSQLState(t, err, "CV005")
	})
	t.Run("superuser: more than the redaction, with the erasure recorded", func(t *testing.T) {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
				VALUES ('alice', gen_random_uuid(), $1, 'why')`, conv); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE convo.message_parts SET body = convo_private.redact_part(body) || '{"note": "forged"}'
				WHERE conversation_id = $1`, conv)
			return err
		})
		requireSQLState(t, err, "CV005")
	})
	requireFingerprint(t, db, "the refused erasures", before)
}

// TestEraseOwnerWithNothingStored: an owner with nothing stored is not an
// error; the erasure returns no rows and is recorded.
func TestEraseOwnerWithNothingStored(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	rows := queryRowsAs[string](t, db, `SELECT place FROM convo.erase_owner('nobody-here', 'asked to forget')`)
	requireSlice(t, "rows", rows, []string{})
	requireEqual(t, "recorded", queryRow[int64](t, db, `SELECT count(*) FROM convo.owner_erasures WHERE owner_id = 'nobody-here'`), int64(1))
}

// TestEraseOwnerChecksTheCaller: a DBA's SECURITY DEFINER helper, owned by a
// member of convo_admin and callable by the application, runs erase_owner
// and erase_conversation with the admin's privileges but the caller's
// owner checks (convo_private.caller: the application's login). A convo_app
// login with owner alice set erases bob through it: CV011 (an owner the
// session may not write for, as begin_receipt answers), where
// erase_conversation of bob's conversation answers CV002, and nothing is
// written. Alice's own erasure through it still works, recorded as the
// application's; a DBA's direct call with no owner set still erases any
// owner.
func TestEraseOwnerChecksTheCaller(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	web := loginAs(t, db, "convo_app") // before the helper: its grants go first

	helper := "dba_helper_" + strings.ReplaceAll(newID()[:13], "-", "")
	ident := pgx.Identifier{helper}.Sanitize()
	mustExec(t, db, `CREATE ROLE `+ident+` NOLOGIN IN ROLE convo_admin`)
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `DROP OWNED BY `+ident); err != nil {
			t.Errorf("dropping what %s owns: %v", helper, err)
		}
		if _, err := db.Exec(ctx, `DROP ROLE `+ident); err != nil {
			t.Errorf("dropping role %s: %v", helper, err)
		}
	})
	webRole := pgx.Identifier{web.Config().ConnConfig.User}.Sanitize()
	for _, st := range []string{
		`CREATE SCHEMA dba_tools AUTHORIZATION ` + ident,
		`CREATE FUNCTION dba_tools.forget_owner(p_owner text) RETURNS SETOF text LANGUAGE sql SECURITY DEFINER
		   SET search_path = pg_catalog, pg_temp
		   AS $$ SELECT place || '=' || rows_redacted FROM convo.erase_owner(p_owner, 'asked by the user') $$`,
		`CREATE FUNCTION dba_tools.forget_conversation(p_conversation uuid) RETURNS SETOF text LANGUAGE sql SECURITY DEFINER
		   SET search_path = pg_catalog, pg_temp
		   AS $$ SELECT place || '=' || rows_redacted FROM convo.erase_conversation(p_conversation, 'asked by the user') $$`,
		`ALTER FUNCTION dba_tools.forget_owner(text) OWNER TO ` + ident,
		`ALTER FUNCTION dba_tools.forget_conversation(uuid) OWNER TO ` + ident,
		`REVOKE ALL ON FUNCTION dba_tools.forget_owner(text), dba_tools.forget_conversation(uuid) FROM PUBLIC`,
		`GRANT USAGE ON SCHEMA dba_tools TO ` + webRole,
		`GRANT EXECUTE ON FUNCTION dba_tools.forget_owner(text), dba_tools.forget_conversation(uuid) TO ` + webRole,
	} {
		mustExec(t, db, st)
	}

	before := fingerprint(t, db)
	requireSQLState(t, asOwner(web, "alice", `SELECT * FROM dba_tools.forget_owner('bob')`), "CV011")
	requireSQLState(t, asOwner(web, "alice", `SELECT * FROM dba_tools.forget_conversation($1)`, bob.conv), "CV002")
	requireSQLState(t, asOwner(web, "", `SELECT * FROM dba_tools.forget_owner('alice')`), "CV011")
	requireFingerprint(t, db, "the refused erasures through the helper", before)

	if got := queryAsOwner(t, web, "alice", `SELECT * FROM dba_tools.forget_owner('alice')`); len(got) == 0 {
		t.Fatal("alice's erasure through the helper redacted nothing")
	}
	requireEqual(t, "alice's erasures, by the application", queryRow[string](t, db, `
		SELECT string_agg(DISTINCT erased_by, ',') FROM convo.erasures WHERE owner_id = 'alice'`), web.Config().ConnConfig.User)
	requireEqual(t, "bob's erasures so far", queryRow[int64](t, db, `SELECT count(*) FROM convo.erasures WHERE owner_id = 'bob'`), int64(0))
	requireEqual(t, "bob's texts still there", queryRow[int64](t, db, `SELECT count(*) FROM convo.message_parts
		WHERE conversation_id = $1 AND body -> 'erased' IS NULL`, bob.conv) > 0, true)

	admin := loginAs(t, db, "convo_admin")
	if got := queryAsOwner(t, admin, "", `SELECT place FROM convo.erase_owner('bob', 'asked by the user')`); len(got) == 0 {
		t.Fatal("the DBA's direct erasure of bob redacted nothing")
	}
	requireEqual(t, "bob's texts after the DBA's erasure", queryRow[int64](t, db, `SELECT count(*) FROM convo.message_parts
		WHERE conversation_id = $1 AND body -> 'erased' IS NULL`, bob.conv), int64(0))
}
