package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Attacks on 0045 (restore_problem: only a log begun by an import holds
// messages from another product), 0046
// (the database's live-updates switch) and 0047 (the ledger on generic
// plans). Each test passes when the defence holds.

// TestAttackLiveUpdatesOnlyTheAdminSetsIt: the application (with and
// without an owner set) and the reader are refused set_live_updates and
// every direct read or write of convo_private.settings (42501); they read
// the switch only through live_updates(); NULL from the admin is CV011;
// nothing is written by any of it.
func TestAttackLiveUpdatesOnlyTheAdminSetsIt(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	app := loginAs(t, db, "convo_app")
	reader := loginAs(t, db, "convo_reader")
	before := fingerprint(t, db)
	type attempt struct {
		name  string
		pool  *pgxpool.Pool
		owner string
		sql   string
		code  string
	}
	var attempts []attempt
	for _, who := range []struct {
		name  string
		pool  *pgxpool.Pool
		owner string
	}{{"app without owner", app, ""}, {"app as owner-1", app, "owner-1"}, {"reader", reader, ""}, {"reader as owner-1", reader, "owner-1"}} {
		for _, q := range []string{
			`SELECT convo.set_live_updates(false)`,
			`SELECT convo.set_live_updates(true)`,
			`SELECT live_updates FROM convo_private.settings`,
			`UPDATE convo_private.settings SET live_updates = false`,
			`INSERT INTO convo_private.settings (live_updates, set_by) VALUES (false, 'x')`,
			`DELETE FROM convo_private.settings`,
		} {
			attempts = append(attempts, attempt{who.name, who.pool, who.owner, q, "42501"})
		}
	}
	attempts = append(attempts, attempt{"admin NULL", admin, "", `SELECT convo.set_live_updates(NULL)`, "CV011"},
		attempt{"admin NULL as owner", admin, "owner-1", `SELECT convo.set_live_updates(NULL::boolean)`, "CV011"},
		attempt{"admin direct update", admin, "", `UPDATE convo_private.settings SET live_updates = false`, "42501"})
	for _, a := range attempts {
		err := asOwner(a.pool, a.owner, a.sql)
		if sqlState(err) != a.code {
			t.Errorf("%s: %s: got %v, want %s", a.name, a.sql, err, a.code)
		}
	}
	requireFingerprint(t, db, "the refused attempts", before)
	requireEqual(t, "live_updates() as the app", queryRow[bool](t, app, `SELECT convo.live_updates()`), true)
	requireEqual(t, "live_updates() as the reader", queryRow[bool](t, reader, `SELECT convo.live_updates()`), true)
}

// TestAttackLiveUpdatesCannotBeForcedOn: with the database's switch off, a
// session that sets convo.notify to 'on' (or anything else), as the
// application or as a superuser, sends nothing; the head log still records
// every move.
func TestAttackLiveUpdatesCannotBeForcedOn(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	app := loginAs(t, db, "convo_app")
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	heads, effects := listen(t, db, "convo_head"), listen(t, db, "convo_effect")
	mustExec(t, admin, `SELECT convo.set_live_updates(false)`)
	logBefore := len(headLogNotes(t, db, conv))
	for i, v := range []string{"on", "true", "ON", "", "yes"} {
		for _, pool := range []*pgxpool.Pool{app, db} {
			err := inOwnerTx(pool, "owner-1", func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT set_config('convo.notify', $1, true)`, v); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv,
					effToolUses(effBuy(fmt.Sprintf("toolu_force_%d_%p", i, pool), "buy", 100+i)))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	requireEqual(t, "convo_head notifications forced on", len(heads.drain("convo_head")), 0)
	requireEqual(t, "convo_effect notifications forced on", len(effects.drain("convo_effect")), 0)
	requireEqual(t, "head-log rows", len(headLogNotes(t, db, conv))-logBefore, 10)
}

// TestAttackLiveUpdatesDirectWrites: the settings row written by hand.
// NULL is refused by the column (23502) for the superuser, the owner role
// and a role granted the table's privileges; a hand-written row (false, or
// deleted: back to the default) never breaks a write; the owner role and a
// granted role that turn it off silence every writer; set_deletion_retention
// and set_search_config keep the switch, and set_live_updates keeps their
// settings.
func TestAttackLiveUpdatesDirectWrites(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	app := loginAs(t, db, "convo_app")
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	heads := listen(t, db, "convo_head")
	grantee := createGrantedRole(t, db)
	gi := pgx.Identifier{grantee}.Sanitize()
	mustExec(t, db, `GRANT USAGE ON SCHEMA convo_private TO `+gi)
	mustExec(t, db, `GRANT SELECT, INSERT, UPDATE, DELETE ON convo_private.settings TO `+gi)
	ctx := context.Background()
	n := 0
	write := func(what string, wantHeard int) {
		t.Helper()
		n++
		if err := asOwner(app, "owner-1", `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv,
			effToolUses(effBuy(fmt.Sprintf("toolu_direct_%d", n), "buy", 100+n))); err != nil {
			t.Fatalf("%s: the application's write: %v", what, err)
		}
		requireEqual(t, what+": notifications", len(heads.drain("convo_head")), wantHeard)
	}
	for _, setup := range []string{``, `SET ROLE convo_owner`, `SET ROLE ` + gi} {
		conn := dedicatedConn(t, db)
		if setup != "" {
			if _, err := conn.Exec(ctx, setup); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{
			`INSERT INTO convo_private.settings (live_updates, set_by) VALUES (NULL, 'x')
			 ON CONFLICT (singleton) DO UPDATE SET live_updates = NULL`,
			`UPDATE convo_private.settings SET live_updates = NULL`,
		} {
			_, err := conn.Exec(ctx, q)
			if q[0] == 'U' && err == nil {
				// No row yet: nothing to update. Make one, then try again.
				mustExec(t, admin, `SELECT convo.set_live_updates(true)`)
				_, err = conn.Exec(ctx, q)
			}
			if sqlState(err) != "23502" {
				t.Errorf("%q: %s: got %v, want 23502", setup, q, err)
			}
		}
		write(setup+" after the refused NULLs", 1)
		if _, err := conn.Exec(ctx, `UPDATE convo_private.settings SET live_updates = false`); err != nil {
			t.Fatalf("%q: %v", setup, err)
		}
		requireEqual(t, setup+": live_updates()", queryRow[bool](t, app, `SELECT convo.live_updates()`), false)
		write(setup+" switched off by hand", 0)
		if _, err := conn.Exec(ctx, `DELETE FROM convo_private.settings`); err != nil {
			t.Fatalf("%q: %v", setup, err)
		}
		requireEqual(t, setup+": live_updates() with no row", queryRow[bool](t, app, `SELECT convo.live_updates()`), true)
		write(setup+" row deleted by hand", 1)
	}
	// The other setters keep the switch; the switch keeps their settings.
	mustExec(t, admin, `SELECT convo.set_live_updates(false)`)
	mustExec(t, admin, `SELECT convo.set_deletion_retention('3 days')`)
	mustExec(t, admin, `SELECT convo.set_search_config('english')`)
	requireEqual(t, "switch after the other setters", queryRow[bool](t, app, `SELECT convo.live_updates()`), false)
	mustExec(t, admin, `SELECT convo.set_live_updates(true)`)
	requireEqual(t, "retention after set_live_updates", queryRow[string](t, app, `SELECT convo.deletion_retention()::text`), "3 days")
	requireEqual(t, "search config after set_live_updates", queryRow[string](t, app, `SELECT convo.search_config()::text`), "english")
	// A fresh database: set_live_updates alone leaves the others at their defaults.
	db2 := newDB(t)
	mustExec(t, loginAs(t, db2, "convo_admin"), `SELECT convo.set_live_updates(false)`)
	app2 := loginAs(t, db2, "convo_app")
	requireEqual(t, "retention after set_live_updates alone", queryRow[string](t, app2, `SELECT convo.deletion_retention()::text`), "30 days")
	requireEqual(t, "search config after set_live_updates alone", queryRow[string](t, app2, `SELECT convo.search_config()::text`), "simple")
}

// TestAttackLiveUpdatesNoCrossOwnerLeak: with the switch on, owner-2's
// application session, listening, learns of owner-1's changes only ids and
// states (as before the change); with it off, nothing at all. live_updates()
// names no one (no set_by, no time) to the app.
func TestAttackLiveUpdatesNoCrossOwnerLeak(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	app := loginAs(t, db, "convo_app")
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	ls := map[string]*listener{"convo_head": listen(t, app, "convo_head"), "convo_effect": listen(t, app, "convo_effect")}
	l := ls["convo_head"]
	if err := asOwner(app, "owner-1", `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv,
		effToolUses(effBuy("toolu_secret", "buy", 4242))); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"convo_head", "convo_effect"} {
		for _, p := range ls[ch].drain(ch) {
			for _, secret := range []string{"owner-1", "4242", "EUR", "toolu_secret"} {
				if strings.Contains(p, secret) {
					t.Errorf("%s payload %s names %q", ch, p, secret)
				}
			}
		}
	}
	mustExec(t, admin, `SELECT convo.set_live_updates(false)`)
	if err := asOwner(app, "owner-1", `SELECT convo.append_message($1, 'user', $2::jsonb)`, conv, textParts("quiet")); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "heard by another owner's session, switched off", len(l.drain("convo_head")), 0)
	// live_updates() is one boolean column.
	requireEqual(t, "live_updates() columns", queryRow[int](t, db,
		`SELECT (pronargs + CASE WHEN prorettype = 'boolean'::regtype THEN 0 ELSE 100 END)::int FROM pg_proc
		  WHERE oid = 'convo.live_updates()'::regprocedure`), 0)
}

// --- The ledger on generic plans ---------------------------------------

// TestAttackLedgerDecisionsAcrossTheSeventhPart: a message of 12 calls on
// tools of each scope, so that calls before and after the eighth part
// (record_tool_call vs record_tool_call_planned) repeat one another: a
// later call with an earlier call's conversation_args key reuses it (both
// ways across the boundary), a rejected and an unregistered call past the
// boundary are rejected and unrecorded; an edit re-runs them (fork_args with
// other input: confirm; conversation_args: reuse) on both sides; after an
// erasure, the same arguments execute again (new key epoch).
func TestAttackLedgerDecisionsAcrossTheSeventhPart(t *testing.T) {
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	effRegisterPurchase(t, db, "cbuy", "conversation_args", "1 hour")
	effRegisterPurchase(t, db, "fbuy", "fork_args", "1 hour")
	effRegisterPurchase(t, db, "tbuy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	user := appendMsg(t, db, conv, "user", textParts("buy things"))
	mk := func(p string) []effCall {
		return []effCall{
			effBuy(p+"0", "cbuy", 10),                                    // execute
			effBuy(p+"1", "fbuy", 11),                                    // execute
			effBuy(p+"2", "tbuy", 12),                                    // execute
			effBuy(p+"3", "cbuy", 13),                                    // execute
			effBuy(p+"4", "cbuy", 10),                                    // reuse of 0 (both generic)
			{p + "5", "cbuy", `{"amount_minor": 0, "currency": "EUR"}`},  // rejected
			effBuy(p+"6", "nosuch", 1),                                   // unregistered
			effBuy(p+"7", "cbuy", 13),                                    // reuse of 3 (planned reuses generic)
			effBuy(p+"8", "cbuy", 18),                                    // execute (planned)
			effBuy(p+"9", "cbuy", 18),                                    // reuse of 8 (planned reuses planned)
			{p + "10", "cbuy", `{"amount_minor": 0, "currency": "EUR"}`}, // rejected (planned)
			effBuy(p+"11", "nosuch", 2),                                  // unregistered (planned)
			effBuy(p+"12", "fbuy", 11),                                   // reuse of 1 (fork_args, same fork)
			effBuy(p+"13", "tbuy", 12),                                   // execute (tool_call: own key)
		}
	}
	first := mk("a")
	appendMsg(t, db, conv, "assistant", effToolUses(first...))
	want := map[string]string{"0": "execute", "1": "execute", "2": "execute", "3": "execute", "4": "reuse",
		"5": "rejected", "7": "reuse", "8": "execute", "9": "reuse", "10": "rejected", "12": "reuse", "13": "execute"}
	same := map[string]string{"4": "0", "7": "3", "9": "8", "12": "1"}
	check := func(p string, want map[string]string, same map[string]string) {
		t.Helper()
		for k, d := range want {
			got := effForCall(t, db, conv, p+k)
			if got.Decision != d {
				t.Errorf("call %s%s: decision %s, want %s", p, k, got.Decision, d)
			}
			if s, ok := same[k]; ok {
				if other := effForCall(t, db, conv, p+s); other.EffectID != got.EffectID {
					t.Errorf("call %s%s: effect %s, want call %s%s's %s", p, k, got.EffectID, p, s, other.EffectID)
				}
			}
		}
		for _, k := range []string{"6", "11"} {
			_, err := effForCallErr(db, conv, p+k)
			if sqlState(err) != "CV007" {
				t.Errorf("call %s%s (unregistered): got %v, want CV007", p, k, err)
			}
		}
	}
	check("a", want, same)
	// An edit of the user turn: the same calls on a new branch at a new fork
	// point... and a regeneration of the answer at the same fork point.
	mustExec(t, db, `SELECT convo.move_head($1, $2, 'back')`, conv, user)
	second := mk("b")
	// Other amounts for fork_args and tool_call: a re-run, not the same request.
	second[1] = effBuy("b1", "fbuy", 21)
	second[12] = effBuy("b12", "fbuy", 21)
	second[2] = effBuy("b2", "tbuy", 12)
	second[13] = effBuy("b13", "tbuy", 12)
	appendMsg(t, db, conv, "assistant", effToolUses(second...))
	// Same fork point (the user message), other branch: conversation_args
	// reuses branch a's effects; fork_args/tool_call re-runs are confirms,
	// on both sides of the boundary.
	wantB := map[string]string{"0": "reuse", "1": "confirm", "2": "confirm", "3": "reuse", "4": "reuse",
		"5": "rejected", "7": "reuse", "8": "reuse", "9": "reuse", "10": "rejected", "12": "reuse", "13": "confirm"}
	check("b", wantB, map[string]string{"4": "0", "7": "3", "9": "8", "12": "1"})
	for k, a := range map[string]string{"0": "a0", "3": "a3", "8": "a8"} {
		if effForCall(t, db, conv, "b"+k).EffectID != effForCall(t, db, conv, a).EffectID {
			t.Errorf("call b%s does not reuse %s", k, a)
		}
	}
	// After an erasure: the same arguments execute under a new epoch's key.
	mustExec(t, admin, `SELECT * FROM convo.erase_conversation($1, 'asked')`, conv)
	third := mk("c")
	appendMsg(t, db, conv, "assistant", effToolUses(third...))
	// (0, 3 and 8 are re-runs of branch a's calls at the same fork point:
	// confirm; never a reuse of an erased effect.)
	wantC := map[string]string{"0": "confirm", "3": "confirm", "4": "reuse", "7": "reuse", "8": "confirm", "9": "reuse",
		"5": "rejected", "10": "rejected"}
	check("c", wantC, map[string]string{"4": "0", "7": "3", "9": "8"})
	for k, a := range map[string]string{"0": "a0", "3": "a3", "8": "a8"} {
		if effForCall(t, db, conv, "c"+k).EffectID == effForCall(t, db, conv, a).EffectID {
			t.Errorf("call c%s after the erasure reuses %s", k, a)
		}
	}
	requireEqual(t, "self_check failures", len(failingChecks(t, db)), 0)
}

// oneMessage times, on a new database, one message of n calls.
func oneMessage(t *testing.T, n int) time.Duration {
	t.Helper()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "user", textParts("go"))
	calls := make([]effCall, n)
	for j := range calls {
		calls[j] = effBuy(fmt.Sprintf("toolu_%d", j), "buy", 1+j%1000)
	}
	start := time.Now()
	appendMsg(t, db, conv, "assistant", effToolUses(calls...))
	return time.Since(start)
}

// requireLinear fails when 4n costs more than 8 times n (linear is ~4,
// quadratic ~16), ignoring anything under a second.
func requireLinear(t *testing.T, what string, small, big time.Duration) {
	t.Helper()
	t.Logf("%s: n %v, 4n %v (x%.1f)", what, small, big, float64(big)/float64(small))
	if big > time.Second && big > 8*small {
		t.Errorf("%s: 4n took %v, n %v: more than 8 times", what, big, small)
	}
}

// TestAttackLedgerOneMessageStaysLinear: one message of 100 and 400 calls
// on a new database.
func TestAttackLedgerOneMessageStaysLinear(t *testing.T) {
	requireLinear(t, "one message", oneMessage(t, 100), oneMessage(t, 400))
}

// --- restore_problem (0045) ---------------------------------------------

// TestAttackRestoreCreatedLogWithImportsInOtherShapes: a ChatGPT import's
// export, with its head log begun otherwise than by the import: by
// 'create' with the import kept as a later merge row; by 'append' (a
// conversation the API began with no system prompt); by a move_head
// reason; with no head log at all and no head. Each is a conversation the
// API began holding messages dated by another product before it: each is
// refused with CV011 and writes nothing (before, only 'create' was).
func TestAttackRestoreCreatedLogWithImportsInOtherShapes(t *testing.T) {
	src := newDB(t)
	conv := mustImport(t, loginAs(t, src, "convo_app"), "owner-1", "chatgpt", tinyChatGPT("created-here", "Hi."))
	doc := exportAs(t, src, "", conv)
	var x map[string]any
	if err := json.Unmarshal([]byte(doc), &x); err != nil {
		t.Fatal(err)
	}
	t.Logf("head_log: %v", x["head_log"])
	for _, c := range []struct {
		name string
		edit func(x map[string]any)
	}{
		{"create then an import merge row", func(x map[string]any) {
			hl := rows(x, "head_log")
			first := map[string]any{}
			for k, v := range hl[0] {
				first[k] = v
			}
			first["reason"] = "create"
			first["import_id"] = nil
			first["seq"] = json.Number("0")
			first["previous_head_id"] = nil
			x["head_log"] = append([]any{first}, x["head_log"].([]any)...)
			hl[0]["previous_head_id"] = first["head_message_id"]
		}},
		{"append", func(x map[string]any) {
			rows(x, "head_log")[0]["reason"] = "append"
			rows(x, "head_log")[0]["import_id"] = nil
		}},
		{"a move_head reason", func(x map[string]any) {
			rows(x, "head_log")[0]["reason"] = "user_pick"
			rows(x, "head_log")[0]["import_id"] = nil
		}},
		{"regenerate", func(x map[string]any) {
			rows(x, "head_log")[0]["reason"] = "regenerate"
			rows(x, "head_log")[0]["import_id"] = nil
		}},
		{"no head log and no head", func(x map[string]any) {
			x["head_log"] = []any{}
			x["conversation"].(map[string]any)["head_message_id"] = nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := newDB(t)
			admin := loginAs(t, dst, "convo_admin")
			forged := editExport(t, doc, c.edit)
			before := fingerprint(t, dst)
			_, err := importAs(admin, "owner-1", "conversation", forged)
			if err == nil {
				t.Errorf("restored: a conversation the API began holding messages from another product; "+
					"head log %v; messages %v; self_check failures %v",
					queryRowsAs[string](t, dst, `SELECT reason || ' ' || coalesce(import_id::text, '-') || ' ' || moved_at FROM convo.conversation_head_log`),
					queryRowsAs[string](t, dst, `SELECT m.role || ' created ' || m.created_at || ' (conversation created ' || c.created_at || ')'
					   FROM convo.messages m JOIN convo.conversations c ON c.id = m.conversation_id ORDER BY m.depth`),
					failingChecks(t, dst))
				return
			}
			t.Logf("refused: %v (%s)", err, pgError(t, err).Detail)
			requireSQLState(t, err, "CV011")
			requireFingerprint(t, dst, "the refused restore", before)
		})
	}
}
