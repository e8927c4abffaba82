package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Attacks on 0050_helpers_keep_their_plans: search_text,
// search_config_in_use and notifies became PL/pgSQL. The oracle is the
// functions 0050 replaced (its down migration's SQL texts), created in a
// schema of their own, compared with the new ones on one session, after
// enough calls that PL/pgSQL has settled on its kept (generic) plans.

// oldHelpers creates the SQL functions 0050 replaced in schema oldh.
func oldHelpers(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	mustExec(t, db, `CREATE SCHEMA oldh`)
	mustExec(t, db, `CREATE FUNCTION oldh.notifies() RETURNS boolean LANGUAGE sql STABLE
	    SET search_path = pg_catalog, pg_temp AS $$
	    SELECT current_setting('convo.notify', true) IS DISTINCT FROM 'off'
	       AND coalesce((SELECT s.live_updates FROM convo_private.settings s), true) $$`)
	mustExec(t, db, `CREATE FUNCTION oldh.search_config_in_use() RETURNS regconfig LANGUAGE sql STABLE
	    SET search_path = pg_catalog, pg_temp AS $$
	    SELECT coalesce((SELECT s.search_config FROM convo_private.settings s), 'simple')::regconfig $$`)
	mustExec(t, db, `CREATE FUNCTION oldh.search_text(p_parts jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
	    RETURN coalesce((SELECT string_agg(e.part ->> 'text', E'\n' ORDER BY e.n)
	                       FROM jsonb_array_elements(p_parts) WITH ORDINALITY AS e (part, n)
	                      WHERE e.part ->> 'type' = 'text'), '')`)
	mustExec(t, db, `CREATE FUNCTION oldh.search_document(p_parts jsonb, p_config regconfig, p_owner_id text)
	    RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE
	    RETURN to_tsvector(p_config, oldh.search_text(p_parts))
	           || array_to_tsvector(ARRAY[convo_private.search_owner(p_owner_id)])`)
}

// answer is one call's result or SQLSTATE, as text.
func answer(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) string {
	var s *string
	if err := q.QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		return "ERROR " + sqlState(err)
	}
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}

// TestAttackHelpersSearchTextOracle: search_text and search_document answer
// as the SQL functions 0050 replaced for every odd parts value (SQL NULL,
// JSON null, scalars, objects, text parts whose text is a number, null,
// object or empty, types that are not strings, non-object elements, many
// parts, unicode), each called often enough on one session for PL/pgSQL
// to use its kept plan, and errors keep their SQLSTATE.
func TestAttackHelpersSearchTextOracle(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	oldHelpers(t, db)
	ctx := context.Background()
	conn := dedicatedConn(t, db)
	many := make([]string, 0, 3000)
	for i := 0; i < 3000; i++ {
		if i%3 == 0 {
			many = append(many, `{"type":"image","text":"hidden"}`)
		} else {
			many = append(many, fmt.Sprintf(`{"type":"text","text":"word%d"}`, i))
		}
	}
	inputs := []*string{nil}
	for _, s := range []string{
		`[]`, `null`, `{}`, `"text"`, `1`, `true`,
		`{"type":"text","text":"an object, not an array"}`,
		`[{"type":"text","text":"a lamp"},{"type":"text","text":"b lamp"}]`,
		`[{"type":"text","text":1}]`, `[{"type":"text","text":1.50}]`,
		`[{"type":"text","text":null}]`, `[{"type":"text"}]`,
		`[{"type":"text","text":{"nested":"lamp"}}]`, `[{"type":"text","text":["lamp"]}]`,
		`[{"type":"text","text":""}]`, `[{"type":"text","text":""},{"type":"text","text":""}]`,
		`[{"type":"text","text":null},{"type":"text","text":"x"},{"type":"text","text":null}]`,
		`[{"type":["text"],"text":"x"}]`, `[{"type":"TEXT","text":"x"}]`, `[{"type":"text ","text":"x"}]`,
		`[1, "text", null, [1], {"text":"no type"}, {"type":"text","text":"yes"}]`,
		`[{"type":"tool_use","id":"c1","name":"buy_lamp","input":{"text":"lamp"}},{"type":"text","text":"bought"}]`,
		`[{"type":"text","text":"ünïcödé 漢字 \ud83d\ude00 line\nbreak\ttab"}]`,
		`[{"type":"text","text":"dup","type":"text"}]`,
		`[` + strings.Join(many, ",") + `]`,
	} {
		inputs = append(inputs, &s)
	}
	for round := 0; round < 8; round++ {
		for i, in := range inputs {
			for _, pair := range [][2]string{
				{`SELECT convo_private.search_text($1::jsonb)`, `SELECT oldh.search_text($1::jsonb)`},
				{`SELECT convo_private.search_document($1::jsonb, 'english', 'owner-x')::text`,
					`SELECT oldh.search_document($1::jsonb, 'english', 'owner-x')::text`},
				{`SELECT convo_private.search_text(j) FROM (SELECT $1::jsonb AS j OFFSET 0) s`,
					`SELECT oldh.search_text(j) FROM (SELECT $1::jsonb AS j OFFSET 0) s`},
			} {
				got, want := answer(ctx, conn, pair[0], in), answer(ctx, conn, pair[1], in)
				if got != want {
					show := "NULL"
					if in != nil {
						show = *in
					}
					t.Fatalf("round %d input %d %.200s:\n%s\n  = %.300s\nthe SQL function 0050 replaced: %.300s", round, i, show, pair[0], got, want)
				}
			}
		}
	}
}

// TestAttackHelpersSettingsOracle: search_config_in_use and notifies answer
// as the functions 0050 replaced on a session that has called them many
// times (kept plans), while the settings change under it: in its own
// transaction (set_search_config, set_live_updates, SET LOCAL
// convo.notify in every spelling) and from another session between its
// calls.
func TestAttackHelpersSettingsOracle(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	oldHelpers(t, db)
	ctx := context.Background()
	conn := dedicatedConn(t, db)
	other := dedicatedConn(t, db)
	compare := func(step string) {
		t.Helper()
		for i := 0; i < 7; i++ {
			for _, f := range []string{"search_config_in_use()::text", "notifies()::text"} {
				got := answer(ctx, conn, `SELECT convo_private.`+f)
				want := answer(ctx, conn, `SELECT oldh.`+f)
				if got != want {
					t.Fatalf("%s: %s = %s, the SQL function 0050 replaced %s", step, f, got, want)
				}
			}
		}
	}
	compare("fresh")
	// Another session changes the settings between this session's calls.
	for _, c := range []string{"english", "german", "simple", "english"} {
		if _, err := other.Exec(ctx, `SELECT convo.set_search_config($1)`, c); err != nil {
			t.Fatal(err)
		}
		compare("after another session's set_search_config " + c)
		requireEqual(t, "search_config_in_use after another session's set_search_config",
			answer(ctx, conn, `SELECT convo_private.search_config_in_use()::text`), fmt.Sprintf("%q", c))
	}
	for _, on := range []bool{false, true, false} {
		if _, err := other.Exec(ctx, `SELECT convo.set_live_updates($1)`, on); err != nil {
			t.Fatal(err)
		}
		compare(fmt.Sprintf("after another session's set_live_updates(%v)", on))
		requireEqual(t, "notifies after another session's set_live_updates",
			answer(ctx, conn, `SELECT convo_private.notifies()::text`), fmt.Sprintf("%q", fmt.Sprint(on)))
	}
	if _, err := other.Exec(ctx, `SELECT convo.set_live_updates(true)`); err != nil {
		t.Fatal(err)
	}
	// Within one transaction of this session.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, st := range []string{
		`SELECT convo.set_search_config('german')`,
		`SET LOCAL convo.notify = 'off'`,
		`SELECT convo.set_live_updates(false)`,
		`SET LOCAL convo.notify = 'on'`,
		`SELECT convo.set_live_updates(true)`,
		`SET LOCAL convo.notify = 'OFF'`,
		`SET LOCAL convo.notify = ''`,
		`SET LOCAL convo.notify = ' off'`,
		`SET LOCAL convo.notify = 'off'`,
		`SELECT convo.set_search_config('simple')`,
		`RESET convo.notify`,
		`SELECT convo.set_search_config('english')`,
	} {
		if _, err := tx.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		for i := 0; i < 7; i++ {
			for _, f := range []string{"search_config_in_use()::text", "notifies()::text"} {
				got, want := answer(ctx, tx, `SELECT convo_private.`+f), answer(ctx, tx, `SELECT oldh.`+f)
				if got != want {
					t.Fatalf("in a transaction after %s: %s = %s, the SQL function 0050 replaced %s", st, f, got, want)
				}
			}
		}
	}
}

// TestAttackHelpersConfigSwitchedInTheWritingTransaction: a transaction
// that sets the search configuration and then writes and searches, on a
// session whose writes have already kept the helpers' plans, indexes the
// new message under the new configuration (its entry equals the old
// functions' document), finds it by a stem only that configuration makes,
// and its snippet is the old functions' ts_headline.
func TestAttackHelpersConfigSwitchedInTheWritingTransaction(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	oldHelpers(t, db)
	ctx := context.Background()
	conn := dedicatedConn(t, db)
	conv := createConversation(t, db, "owner-cfg", "")
	write := func(q pgx.Tx, text string) string {
		t.Helper()
		var id string
		if err := q.QueryRow(ctx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts(text)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Warm: many writes on this session under 'simple'.
	for i := 0; i < 8; i++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		write(tx, fmt.Sprintf("warming message %d", i))
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT convo.set_search_config('english')`); err != nil {
		t.Fatal(err)
	}
	msg := write(tx, "The cats were running quickly towards the lamps")
	var same bool
	if err := tx.QueryRow(ctx, `SELECT s.document = oldh.search_document(m.parts, 'english', 'owner-cfg')
	      FROM convo_private.message_search s JOIN convo.messages m ON m.id = s.message_id AND m.conversation_id = s.conversation_id
	     WHERE s.message_id = $1`, msg).Scan(&same); err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Fatalf("the entry written after set_search_config('english') in the same transaction is not the english document")
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', 'owner-cfg', true)`); err != nil {
		t.Fatal(err)
	}
	var snippet, want string
	if err := tx.QueryRow(ctx, `SELECT snippet FROM convo.search_conversations('owner-cfg', 'run lamp')`).Scan(&snippet); err != nil {
		t.Fatalf("searching 'run lamp' (english stems) in the same transaction: %v", err)
	}
	if err := tx.QueryRow(ctx, `SELECT ts_headline('english', oldh.search_text(m.parts), websearch_to_tsquery('english', 'run lamp'),
	        'StartSel=**, StopSel=**, MaxWords=30, MinWords=10, MaxFragments=2, FragmentDelimiter=" … "')
	      FROM convo.messages m WHERE m.id = $1`, msg).Scan(&want); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "snippet", snippet, want)
	// Every entry, the warm ones too, is the english document.
	var stale int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM convo_private.message_search s
	      JOIN convo.messages m ON m.id = s.message_id AND m.conversation_id = s.conversation_id
	     WHERE s.document IS DISTINCT FROM oldh.search_document(m.parts, 'english', 'owner-cfg')`).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "entries not under english", stale, 0)
}

// TestAttackHelpersNotifyToggledBetweenWrites: on a session whose writes
// have kept notifies' plan, one transaction that switches convo.notify
// (SET LOCAL) and the database's switch (set_live_updates) between its
// writes sends exactly the notifications of the writes made while both
// were on.
func TestAttackHelpersNotifyToggledBetweenWrites(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	conn := dedicatedConn(t, db)
	conv := createConversation(t, db, "owner-n", "")
	heads := listen(t, db, "convo_head")
	for i := 0; i < 8; i++ {
		if _, err := conn.Exec(ctx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("warm")); err != nil {
			t.Fatal(err)
		}
	}
	requireEqual(t, "warm-up notifications", len(heads.drain("convo_head")), 8)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, st := range []string{
		"write", `SET LOCAL convo.notify = off`, "write", `SET LOCAL convo.notify = on`, "write",
		`SELECT convo.set_live_updates(false)`, "write", `SET LOCAL convo.notify = off`, "write",
		`SELECT convo.set_live_updates(true)`, "write", `SET LOCAL convo.notify = on`, "write",
	} {
		if st != "write" {
			if _, err := tx.Exec(ctx, st); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var id string
		if err := tx.QueryRow(ctx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("x")).Scan(&id); err != nil {
			t.Fatal(err)
		}
		var on bool
		if err := tx.QueryRow(ctx, `SELECT current_setting('convo.notify', true) IS DISTINCT FROM 'off'
		        AND coalesce((SELECT live_updates FROM convo_private.settings), true)`).Scan(&on); err != nil {
			t.Fatal(err)
		}
		if on {
			sent = append(sent, id)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range heads.drain("convo_head") {
		var n headNote
		decodeExact(t, p, &n, headNoteKeys...)
		got = append(got, n.HeadMessageID)
	}
	requireSlice(t, "heads notified", got, sent)
}

// TestAttackHelpersSessionSettingsChangeNoAnswer: settings any convo_app
// session may SET and the SECURITY DEFINER callers do not pin (parallel
// query forced with free workers, a plan cache mode either way, a
// search_path of its own, a default text search configuration) and
// temporary objects it may create (a text search configuration named
// simple, a table named settings) change neither what its writes index nor
// what its searches find and show: the same as the old functions' answers.
func TestAttackHelpersSessionSettingsChangeNoAnswer(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	oldHelpers(t, db)
	app := loginAs(t, db, "convo_app")
	mustExec(t, db, `GRANT TEMPORARY ON DATABASE `+pgx.Identifier{db.Config().ConnConfig.Database}.Sanitize()+` TO convo_app`)
	ctx := context.Background()
	for _, settings := range [][]string{
		{`SET force_parallel_mode = on`, `SET parallel_setup_cost = 0`, `SET parallel_tuple_cost = 0`,
			`SET min_parallel_table_scan_size = 0`, `SET min_parallel_index_scan_size = 0`, `SET max_parallel_workers_per_gather = 4`},
		{`SET plan_cache_mode = force_generic_plan`},
		{`SET plan_cache_mode = force_custom_plan`},
		{`SET search_path = pg_temp, public, pg_catalog`, `SET default_text_search_config = 'german'`,
			`CREATE TEXT SEARCH CONFIGURATION pg_temp.simple (COPY = pg_catalog.german)`,
			`CREATE TEMP TABLE settings (search_config text, live_updates boolean)`,
			`INSERT INTO settings VALUES ('german', false)`},
	} {
		owner := "owner-" + newID()[:8]
		conn, err := app.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := conn.Hijack()
		// The connection's temporary objects go before it closes: a
		// backend drops them only after its client has gone, and the
		// login role's DROP at cleanup would otherwise race with that.
		defer c.Close(ctx)
		defer c.Exec(ctx, `DISCARD TEMP`)
		for _, s := range settings {
			if _, err := c.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		var msgs []string
		err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
				return err
			}
			var conv string
			if err := tx.QueryRow(ctx, `SELECT convo.create_conversation($1, NULL::text)::text`, owner).Scan(&conv); err != nil {
				return err
			}
			for i := 0; i < 12; i++ {
				parts := fmt.Sprintf(`[{"type":"text","text":"Lamps number %d are running"},{"type":"text","text":""},{"type":"text","text":"and jumping %d"}]`, i, i)
				var id string
				if err := tx.QueryRow(ctx, `SELECT convo.append_message($1, 'user', $2)::text`, conv, parts).Scan(&id); err != nil {
					return err
				}
				msgs = append(msgs, id)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v: writing: %v", settings, err)
		}
		requireCount(t, db, 0, `SELECT count(*) FROM convo_private.message_search s
		      JOIN convo.messages m ON m.id = s.message_id AND m.conversation_id = s.conversation_id
		      JOIN convo.conversations c ON c.id = m.conversation_id
		     WHERE c.owner_id = $1 AND s.document IS DISTINCT FROM oldh.search_document(m.parts, 'simple', $1)`, owner)
		requireCount(t, db, int64(len(msgs)), `SELECT count(*) FROM convo_private.message_search s
		      JOIN convo.conversations c ON c.id = s.conversation_id WHERE c.owner_id = $1`, owner)
		for round := 0; round < 7; round++ {
			err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, `SELECT message_id::text, snippet FROM convo.search_conversations($1, 'running lamps', 100)`, owner)
				if err != nil {
					return err
				}
				got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ ID, Snippet string }])
				if err != nil {
					return err
				}
				if len(got) != len(msgs) {
					return fmt.Errorf("search found %d messages, want %d", len(got), len(msgs))
				}
				for _, h := range got {
					want := queryRow[string](t, db, `SELECT ts_headline('simple', oldh.search_text(parts), websearch_to_tsquery('simple', 'running lamps'),
					        'StartSel=**, StopSel=**, MaxWords=30, MinWords=10, MaxFragments=2, FragmentDelimiter=" … "')
					   FROM convo.messages WHERE id = $1`, h.ID)
					if h.Snippet != want {
						return fmt.Errorf("snippet of %s: %q, want %q", h.ID, h.Snippet, want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%v: round %d: %v", settings, round, err)
			}
		}
	}
}

// TestAttackHelpersWriteWaitsForConcurrentConfig: a session whose writes
// have kept the helpers' plans writes while another session's
// set_search_config('english') holds the index uncommitted; the write waits,
// and its entry is written under english (the configuration committed
// before it could go on), as every other entry.
func TestAttackHelpersWriteWaitsForConcurrentConfig(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	oldHelpers(t, db)
	ctx := context.Background()
	writer := dedicatedConn(t, db)
	setter := dedicatedConn(t, db)
	conv := createConversation(t, db, "owner-w", "")
	for i := 0; i < 8; i++ {
		if _, err := writer.Exec(ctx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("warm cats running")); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := setter.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT convo.set_search_config('english')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := writer.Exec(ctx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("the cats were running"))
		done <- err
	}()
	// The write is waiting on the index.
	for i := 0; ; i++ {
		if queryRow[bool](t, db, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database())`) {
			break
		}
		if i > 200 {
			t.Fatal("the write did not wait for set_search_config")
		}
		select {
		case err := <-done:
			t.Fatalf("the write finished while set_search_config held the index: %v", err)
		default:
		}
		mustExec(t, db, `SELECT pg_sleep(0.02)`)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	requireCount(t, db, 9, `SELECT count(*) FROM convo_private.message_search WHERE conversation_id = $1`, conv)
	requireCount(t, db, 0, `SELECT count(*) FROM convo_private.message_search s
	      JOIN convo.messages m ON m.id = s.message_id AND m.conversation_id = s.conversation_id
	     WHERE s.conversation_id = $1 AND s.document IS DISTINCT FROM oldh.search_document(m.parts, 'english', 'owner-w')`, conv)
}

// TestAttackHelpersWarmSearchSessionSeesOtherSessions: a convo_app session
// that has searched often (its helpers' plans kept) sees what other
// sessions commit between its searches: set_search_config('english') (its
// next search stems: "running" finds "run", and its snippet is the old
// functions' english headline), then the conversation's erasure (nothing
// found, no snippet of it).
func TestAttackHelpersWarmSearchSessionSeesOtherSessions(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	oldHelpers(t, db)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	ctx := context.Background()
	conv := createConversation(t, db, "owner-s", "")
	msg := appendMsg(t, db, conv, "user", textParts("I run daily; secret word zebrafish"))
	pc, err := app.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := pc.Hijack()
	defer c.Close(ctx)
	find := func(query string) []string {
		t.Helper()
		var out []string
		err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', 'owner-s', true)`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT message_id::text || ' ' || snippet FROM convo.search_conversations('owner-s', $1)`, query)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for i := 0; i < 8; i++ {
		if got := find("running"); len(got) != 0 {
			t.Fatalf("under simple, running finds %v", got)
		}
		if got := find("zebrafish"); len(got) != 1 {
			t.Fatalf("zebrafish finds %v", got)
		}
	}
	mustExec(t, admin, `SELECT convo.set_search_config('english')`)
	want := msg + " " + queryRow[string](t, db, `SELECT ts_headline('english', oldh.search_text(parts), websearch_to_tsquery('english', 'running'),
	        'StartSel=**, StopSel=**, MaxWords=30, MinWords=10, MaxFragments=2, FragmentDelimiter=" … "') FROM convo.messages WHERE id = $1`, msg)
	for i := 0; i < 3; i++ {
		requireSlice(t, "running under english", find("running"), []string{want})
	}
	mustExec(t, admin, `SELECT * FROM convo.erase_conversation($1, 'asked')`, conv)
	for _, q := range []string{"running", "zebrafish", "secret"} {
		if got := find(q); len(got) != 0 {
			t.Fatalf("after the erasure %s finds %v", q, got)
		}
	}
}
