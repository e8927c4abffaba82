package tests

import (
	"context"
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Attacks on migration 0049 (path_at in one function). The oracle is the
// implementation 0049 replaced, recreated from its down migration in a
// scratch schema (atk_old), owned and granted as the real one: path_at and
// atk_old.path_at must give the same rows (every column, incomplete
// included) and the same SQLSTATE for every input, caller and state.

// installOldPathAt creates atk_old.path_from and atk_old.path_at, the text
// of 0049's down migration with path_at calling atk_old.path_from, owned by
// convo_owner and executable by whoever may execute convo.path_at.
func installOldPathAt(t testing.TB, db *pgxpool.Pool) {
	t.Helper()
	mustExec(t, db, `CREATE SCHEMA atk_old AUTHORIZATION convo_owner`)
	mustExec(t, db, `GRANT USAGE ON SCHEMA atk_old TO PUBLIC`)
	mustExec(t, db, `
CREATE FUNCTION atk_old.path_from(p_conversation_id uuid, p_head_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int,
               incomplete boolean)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branches uuid[];
    v_depths   int[];
    v_forks    jsonb;
BEGIN
    IF p_head_id IS NULL THEN
        RETURN;
    END IF;
    IF p_head_id = (SELECT c.head_message_id FROM convo.conversations c WHERE c.id = p_conversation_id) THEN
        SELECT array_agg(l.branch_id), array_agg(l.max_depth) INTO v_branches, v_depths
          FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    ELSE
        SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_branches, v_depths
          FROM convo_private.path_segments(p_conversation_id, p_head_id) s;
    END IF;
    SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n) INTO v_forks
      FROM (SELECT f.parent_id, max(f.sibling_index) AS n
              FROM convo.messages f
             WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
               AND (p_at IS NULL OR f.created_at <= p_at)
             GROUP BY f.parent_id) f;
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END,
           m.incomplete
      FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
END;
$$`)
	mustExec(t, db, `
CREATE FUNCTION atk_old.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int,
               incomplete boolean)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = notice
AS $$
BEGIN
    RETURN QUERY SELECT * FROM atk_old.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at), p_at);
END;
$$`)
	mustExec(t, db, `ALTER FUNCTION atk_old.path_from(uuid, uuid, timestamptz) OWNER TO convo_owner`)
	mustExec(t, db, `ALTER FUNCTION atk_old.path_at(uuid, timestamptz) OWNER TO convo_owner`)
	mustExec(t, db, `REVOKE ALL ON FUNCTION atk_old.path_at(uuid, timestamptz) FROM PUBLIC`)
	mustExec(t, db, `REVOKE ALL ON FUNCTION atk_old.path_from(uuid, uuid, timestamptz) FROM PUBLIC`)
	mustExec(t, db, `GRANT EXECUTE ON FUNCTION atk_old.path_at(uuid, timestamptz) TO convo_app, convo_reader`)
	// The grants must be those of the real path_at, or the role comparison means nothing.
	requireEqual(t, "convo.path_at's grantees",
		queryRow[string](t, db, `SELECT string_agg(a.grantee::regrole::text, ',' ORDER BY a.grantee::regrole::text)
			FROM pg_proc p, aclexplode(p.proacl) a WHERE p.oid = 'convo.path_at(uuid, timestamptz)'::regprocedure AND a.grantee <> p.proowner`),
		"convo_app,convo_reader")
}

// pathAtMismatches compares convo.path_at with atk_old.path_at for conv at
// every instant that matters (each head move's and message's time, a
// microsecond either side, the conversation's creation, +-infinity, now)
// and returns one line per instant where they differ.
func pathAtMismatches(t testing.TB, db *pgxpool.Pool, conv string) []string {
	t.Helper()
	return queryRowsAs[string](t, db, pathAtMismatchSQL, conv)
}

const pathAtMismatchSQL = `
		WITH d (d) AS (VALUES (interval '0'), (interval '-1 microsecond'), (interval '1 microsecond')),
		inst (t) AS (
		    SELECT DISTINCT x FROM (
		        SELECT l.moved_at + d.d FROM convo.conversation_head_log l, d WHERE l.conversation_id = $1
		        UNION ALL SELECT m.created_at + d.d FROM convo.messages m, d WHERE m.conversation_id = $1
		        UNION ALL SELECT c.created_at + d.d FROM convo.conversations c, d WHERE c.id = $1
		        UNION ALL SELECT c.deleted_at FROM convo.conversations c WHERE c.id = $1 AND c.deleted_at IS NOT NULL
		        UNION ALL VALUES ('infinity'::timestamptz), ('-infinity'::timestamptz), (clock_timestamp())) s (x))
		SELECT inst.t::text || ': new ' || n.j::text || ' old ' || o.j::text
		  FROM inst,
		       LATERAL (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.ordinality), '[]') AS j
		                  FROM convo.path_at($1, inst.t) WITH ORDINALITY AS p) n,
		       LATERAL (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.ordinality), '[]') AS j
		                  FROM atk_old.path_at($1, inst.t) WITH ORDINALITY AS p) o
		 WHERE n.j IS DISTINCT FROM o.j
		 ORDER BY inst.t`

func requireSamePathAt(t testing.TB, db *pgxpool.Pool, what, conv string) {
	t.Helper()
	if bad := pathAtMismatches(t, db, conv); len(bad) > 0 {
		t.Fatalf("%s: path_at differs from the old path_at at %d instants, first: %s", what, len(bad), bad[0])
	}
}

// randomHistory writes steps random API calls to conv: appends, edits,
// regenerations, switches to any message, switches away and back in one
// transaction, several moves in one transaction, direct UPDATEs of the
// head, deletion and restore.
// apiOnly leaves out the direct UPDATEs and the deletions (a restore
// refuses a direct_update in the head log).
func randomHistory(t testing.TB, db *pgxpool.Pool, rng *rand.Rand, conv string, steps int, apiOnly bool) {
	t.Helper()
	ctx := context.Background()
	for step := 0; step < steps; step++ {
		path := readPath(t, db, conv)
		all := queryRowsAs[string](t, db, `SELECT id::text FROM convo.messages WHERE conversation_id = $1 ORDER BY created_at`, conv)
		op := rng.Intn(14)
		switch {
		case len(path) == 0 || op < 5:
			role := "user"
			if len(path) > 0 && path[len(path)-1].Role == "user" {
				role = "assistant"
			}
			appendMsg(t, db, conv, role, textParts(fmt.Sprintf("step %d", step)))
		case op < 7:
			if m, ok := pickRole(rng, path, "user"); ok {
				editMsg(t, db, conv, m, textParts(fmt.Sprintf("edited at step %d", step)))
			}
		case op < 8:
			if m, ok := pickRole(rng, path, "assistant"); ok {
				regenerateMsg(t, db, conv, m, textParts(fmt.Sprintf("again at step %d", step)))
			}
		case op < 9:
			moveHead(t, db, conv, all[rng.Intn(len(all))])
		case op < 10:
			// Away and back in one transaction: the head now is the head
			// before, reached by a move back.
			head := headOf(t, db, conv)
			other := all[rng.Intn(len(all))]
			err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT convo.move_head($1, $2)`, conv, other); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `SELECT convo.move_head($1, $2)`, conv, head)
				return err
			})
			if err != nil {
				t.Fatalf("away and back: %v", err)
			}
		case op < 11:
			// Three moves and an append in one transaction.
			err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
				for i := 0; i < 3; i++ {
					if _, err := tx.Exec(ctx, `SELECT convo.move_head($1, $2)`, conv, all[rng.Intn(len(all))]); err != nil {
						return err
					}
				}
				_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("in a transaction"))
				return err
			})
			if err != nil {
				t.Fatalf("moves in one transaction: %v", err)
			}
		case apiOnly:
			moveHead(t, db, conv, all[rng.Intn(len(all))])
		case op < 12:
			// A direct UPDATE by the table owner (logged as direct_update).
			mustExec(t, db, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, all[rng.Intn(len(all))])
		default:
			mustExec(t, db, `SELECT convo.delete_conversation($1)`, conv)
			requireSamePathAt(t, db, fmt.Sprintf("deleted at step %d", step), conv)
			mustExec(t, db, `SELECT convo.restore_deleted_conversation($1)`, conv)
		}
	}
}

// TestAttackPathAtMatchesOldImplementation: on random histories (with
// switches back to the current head, moves in one transaction, direct
// updates, deletion and restore, erasure) path_at answers as before at
// every instant.
func TestAttackPathAtMatchesOldImplementation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	installOldPathAt(t, db)
	for seed := int64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewSource(seed))
		prompt := ""
		if seed%2 == 0 {
			prompt = "You are helpful."
		}
		conv := createConversation(t, db, fmt.Sprintf("atk-owner-%d", seed), prompt)
		requireSamePathAt(t, db, fmt.Sprintf("seed %d, new", seed), conv)
		randomHistory(t, db, rng, conv, 30, false)
		requireSamePathAt(t, db, fmt.Sprintf("seed %d", seed), conv)
		if seed%3 == 0 {
			mustExec(t, db, `SELECT * FROM convo.erase_conversation($1, 'asked')`, conv)
			requireSamePathAt(t, db, fmt.Sprintf("seed %d, erased", seed), conv)
		}
	}
	requireEqual(t, "failing checks", failingChecks(t, db), "")
}

// TestAttackPathAtRestoredConversation: a conversation restored from an
// export (head-log times older than the restore, seq numbered anew) and
// written on afterwards answers path_at as before at every instant.
func TestAttackPathAtRestoredConversation(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	installOldPathAt(t, src)
	installOldPathAt(t, dst)
	rng := rand.New(rand.NewSource(42))
	conv := createConversation(t, src, "owner-r", "Be brief.")
	randomHistory(t, src, rng, conv, 25, true)
	doc := exportAs(t, src, "", conv)
	if _, err := importAs(loginAs(t, dst, "convo_admin"), "owner-r", "conversation", doc); err != nil {
		t.Fatalf("restore: %v", err)
	}
	requireSamePathAt(t, dst, "restored", conv)
	// The restored path_at equals the source's at every head-log instant.
	for _, at := range queryRowsAs[time.Time](t, src, `SELECT moved_at FROM convo.conversation_head_log WHERE conversation_id = $1`, conv) {
		requireSlice(t, "restored path_at at "+at.Format(time.RFC3339Nano), readPathAt(t, dst, conv, at), readPathAt(t, src, conv, at))
	}
	randomHistory(t, dst, rng, conv, 10, false)
	requireSamePathAt(t, dst, "restored then written", conv)
}

// TestAttackPathAtEqualMovedAt: a restored head log whose moves share one
// moved_at (the API can write two moves in one clock tick): the later seq
// wins, as head_at says, and path_at answers as before.
func TestAttackPathAtEqualMovedAt(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	installOldPathAt(t, dst)
	conv := createConversation(t, src, "owner-e", "Be brief.")
	q := appendMsg(t, src, conv, "user", textParts("q"))
	appendMsg(t, src, conv, "assistant", textParts("a"))
	q2 := editMsg(t, src, conv, q, textParts("q2"))
	appendMsg(t, src, conv, "assistant", textParts("a2"))
	moveHead(t, src, conv, q)
	moveHead(t, src, conv, q2)
	doc := editExport(t, exportAs(t, src, "", conv), func(x map[string]any) {
		r := rows(x, "head_log")
		last := r[len(r)-1]["moved_at"]
		for i := len(r) - 3; i < len(r); i++ {
			r[i]["moved_at"] = last
		}
	})
	if _, err := importAs(loginAs(t, dst, "convo_admin"), "owner-e", "conversation", doc); err != nil {
		t.Skipf("restore of equal moved_at refused (%v): nothing to compare", err)
	}
	at := queryRow[time.Time](t, dst, `SELECT max(moved_at) FROM convo.conversation_head_log WHERE conversation_id = $1`, conv)
	requireEqual(t, "head_at at the tie", queryRow[string](t, dst, `SELECT convo.head_at($1, $2)::text`, conv, at), q2)
	got := readPathAt(t, dst, conv, at)
	if len(got) == 0 || got[len(got)-1].MessageID != q2 {
		t.Fatalf("path_at at the tie ends at %v, want %s", ids(got), q2)
	}
	requireSamePathAt(t, dst, "equal moved_at", conv)
}

// TestAttackPathAtCallers: for each caller (convo_app naming the owner,
// another owner, no owner; convo_reader; convo_admin; a login with no
// role; the superuser) and each input (NULL conversation, NULL instant, an
// unknown conversation, the owner's, another owner's, a deleted one, an
// erased one, a deleted conversation with a NULL instant), path_at raises
// the SQLSTATE the old one raised, or returns the same rows.
func TestAttackPathAtCallers(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	installOldPathAt(t, db)
	mk := func(owner string) string {
		c := createConversation(t, db, owner, "sys")
		q := appendMsg(t, db, c, "user", textParts("hello "+owner))
		appendMsg(t, db, c, "assistant", textParts("hi"))
		editMsg(t, db, c, q, textParts("hello again "+owner))
		return c
	}
	own := mk("alice")
	bobs := mk("bob")
	deleted := mk("alice")
	mustExec(t, db, `SELECT convo.delete_conversation($1)`, deleted)
	erased := mk("alice")
	mustExec(t, db, `SELECT * FROM convo.erase_conversation($1, 'asked')`, erased)
	erasedDeleted := mk("alice")
	mustExec(t, db, `SELECT convo.delete_conversation($1)`, erasedDeleted)
	mustExec(t, db, `SELECT * FROM convo.erase_conversation($1, 'asked')`, erasedDeleted)
	empty := createConversation(t, db, "alice", "")
	nobody, _ := newRole(t, db, "NOLOGIN")
	now := dbNow(t, db)
	type input struct {
		name string
		conv any
		at   any
	}
	inputs := []input{
		{"NULL conversation", nil, now},
		{"NULL conversation and instant", nil, nil},
		{"NULL instant", own, nil},
		{"unknown", newID(), now},
		{"unknown, NULL instant", newID(), nil},
		{"own", own, now},
		{"own, before creation", own, now.Add(-time.Hour)},
		{"own, -infinity", own, "-infinity"},
		{"own, infinity", own, "infinity"},
		{"empty", empty, now},
		{"other owner's", bobs, now},
		{"other owner's, NULL instant", bobs, nil},
		{"deleted", deleted, now},
		{"deleted, NULL instant", deleted, nil},
		{"erased", erased, now},
		{"erased and deleted", erasedDeleted, now},
	}
	callers := []struct{ role, owner string }{
		{"convo_app", "alice"}, {"convo_app", "bob"}, {"convo_app", ""}, {"convo_reader", ""},
		{"convo_reader", "alice"}, {"convo_admin", ""}, {"convo_admin", "alice"}, {nobody, "alice"}, {"", ""}, {"", "alice"},
	}
	answer := func(fn, role, owner string, in input) string {
		var out string
		err := asRoleAndOwner(db, role, owner, func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.ordinality), '[]')::text
				FROM `+fn+`($1::uuid, $2::timestamptz) WITH ORDINALITY AS p`, in.conv, in.at).Scan(&out)
		})
		if err != nil {
			return "SQLSTATE " + sqlState(err)
		}
		return out
	}
	for _, c := range callers {
		for _, in := range inputs {
			got, want := answer("convo.path_at", c.role, c.owner, in), answer("atk_old.path_at", c.role, c.owner, in)
			if got != want {
				t.Errorf("as %q naming %q, %s: new %s, old %s", c.role, c.owner, in.name, got, want)
			}
		}
	}
	// And what the contract says outright: another owner's and a deleted
	// conversation do not exist for convo_app (CV002); a NULL is CV011.
	requireEqual(t, "convo_app, bob's", answer("convo.path_at", "convo_app", "alice", input{"", bobs, now}), "SQLSTATE CV002")
	requireEqual(t, "convo_app, deleted", answer("convo.path_at", "convo_app", "alice", input{"", deleted, now}), "SQLSTATE CV002")
	requireEqual(t, "convo_app, deleted, NULL instant", answer("convo.path_at", "convo_app", "alice", input{"", deleted, nil}), "SQLSTATE CV002")
	requireEqual(t, "convo_app, NULL conversation", answer("convo.path_at", "convo_app", "alice", input{"", nil, now}), "SQLSTATE CV011")
	requireEqual(t, "convo_app, NULL instant", answer("convo.path_at", "convo_app", "alice", input{"", own, nil}), "SQLSTATE CV011")
	requireEqual(t, "convo_app, no owner", answer("convo.path_at", "convo_app", "", input{"", own, now}), "SQLSTATE CV002")
	requireEqual(t, "no role", answer("convo.path_at", nobody, "alice", input{"", own, now}), "SQLSTATE 42501")
	if got := answer("convo.path_at", "convo_reader", "", input{"", deleted, now}); strings.HasPrefix(got, "SQLSTATE") || got == "[]" {
		t.Errorf("convo_reader reads a deleted conversation (an abuse report): got %s", got)
	}
}

// TestAttackPathAtStaleLivePath: path_at at the latest instant and path
// read the same live-path index: when the index is damaged (as self_check's
// live_path_index check finds it), they still agree, and path_at agrees
// with the old path_at. The first version of the one-function path_at did
// not: with the conversation's index rows gone, path and the old path_at
// answered empty, and it walked the tree (no segments read fell through to
// path_segments) and answered the whole path, at every instant whose head
// is the head now.
func TestAttackPathAtStaleLivePath(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	installOldPathAt(t, db)
	conv := createConversation(t, db, "alice", "sys")
	q := appendMsg(t, db, conv, "user", textParts("q"))
	appendMsg(t, db, conv, "assistant", textParts("a"))
	editMsg(t, db, conv, q, textParts("q2"))
	appendMsg(t, db, conv, "assistant", textParts("a2"))
	// Empty the index of this conversation, past its guard, as a failed
	// repair or a replica's lag could leave it.
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM convo.live_path WHERE conversation_id = $1`, conv)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	now := dbNow(t, db)
	newRows := readPathAt(t, db, conv, now)
	oldRows := queryPath(t, db, `SELECT `+pathColumns+` FROM atk_old.path_at($1, $2)`, conv, now)
	pathRows := readPath(t, db, conv)
	if len(newRows) != len(oldRows) || len(newRows) != len(pathRows) {
		t.Errorf("with the live-path index emptied: path_at(now) %d rows, old path_at(now) %d rows, path %d rows",
			len(newRows), len(oldRows), len(pathRows))
	}
	if bad := pathAtMismatches(t, db, conv); len(bad) > 0 {
		t.Errorf("with the live-path index emptied, path_at differs from the old one at %d instants, first: %s", len(bad), bad[0])
	}
}

// bufferHits is the shared buffers hit and read by one call, from EXPLAIN
// (ANALYZE, BUFFERS) of a query over the function.
func bufferHits(t testing.TB, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	plan := strings.Join(queryRowsAs[string](t, db, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, FORMAT TEXT) `+sql, args...), "\n")
	m := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`).FindStringSubmatch(plan)
	if m == nil {
		t.Fatalf("no buffers in the plan of %s:\n%s", sql, plan)
	}
	total := 0
	for _, s := range m[1:] {
		if s != "" {
			n, _ := strconv.Atoi(s)
			total += n
		}
	}
	return total
}

// TestAttackPathAtCostNoWorseThanOld: at the latest instant and at an old
// one, on a long conversation with many moves, path_at touches no more
// buffers than the old one (plus a few), and doubling the conversation at
// most doubles its buffers (linear, not worse).
func TestAttackPathAtCostNoWorseThanOld(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	installOldPathAt(t, db)
	conv := createConversation(t, db, "alice", "sys")
	rng := rand.New(rand.NewSource(7))
	measure := func(label string) (int, int) {
		var atNew, atOld []int
		insts := queryRowsAs[time.Time](t, db, `SELECT moved_at FROM convo.conversation_head_log WHERE conversation_id = $1 ORDER BY seq`, conv)
		for _, at := range []time.Time{insts[len(insts)/2], insts[len(insts)-1], dbNow(t, db)} {
			// warm both, then measure
			for i := 0; i < 2; i++ {
				bufferHits(t, db, `SELECT * FROM convo.path_at($1, $2)`, conv, at)
				bufferHits(t, db, `SELECT * FROM atk_old.path_at($1, $2)`, conv, at)
			}
			n := bufferHits(t, db, `SELECT * FROM convo.path_at($1, $2)`, conv, at)
			o := bufferHits(t, db, `SELECT * FROM atk_old.path_at($1, $2)`, conv, at)
			atNew, atOld = append(atNew, n), append(atOld, o)
			if n > o+8 {
				t.Errorf("%s, at %s: path_at hit %d buffers, the old one %d", label, at.Format(time.RFC3339Nano), n, o)
			}
		}
		return atNew[len(atNew)-1], atOld[len(atOld)-1]
	}
	grow := func(n int) {
		for i := 0; i < n; i++ {
			path := readPath(t, db, conv)
			role := "user"
			if len(path) > 0 && path[len(path)-1].Role == "user" {
				role = "assistant"
			}
			switch op := rng.Intn(10); {
			case op < 7:
				appendMsg(t, db, conv, role, textParts("m"))
			case op < 9:
				if m, ok := pickRole(rng, path, "user"); ok {
					editMsg(t, db, conv, m, textParts("e"))
				}
			default:
				all := queryRowsAs[string](t, db, `SELECT id::text FROM convo.messages WHERE conversation_id = $1`, conv)
				moveHead(t, db, conv, all[rng.Intn(len(all))])
				appendMsg(t, db, conv, role, textParts("m"))
			}
		}
	}
	grow(150)
	n1, _ := measure("150 calls")
	grow(150)
	n2, _ := measure("300 calls")
	if n2 > 2*n1+16 {
		t.Errorf("path_at at the latest instant: %d buffers at 150 calls, %d at 300: worse than linear", n1, n2)
	}
}

// TestAttackPathAtInsideTheWritingTransaction: in the transaction that
// moved the head (not yet committed), several moves apart, path_at at each
// instant in between answers as the old one, for the superuser and for
// convo_app naming the owner.
func TestAttackPathAtInsideTheWritingTransaction(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	installOldPathAt(t, db)
	conv := createConversation(t, db, "alice", "sys")
	q := appendMsg(t, db, conv, "user", textParts("q"))
	a := appendMsg(t, db, conv, "assistant", textParts("a"))
	q2 := editMsg(t, db, conv, q, textParts("q2"))
	appendMsg(t, db, conv, "assistant", textParts("a2"))
	for _, role := range []string{"", "convo_app"} {
		err := asRoleAndOwner(db, role, "alice", func(ctx context.Context, tx pgx.Tx) error {
			steps := []string{
				`SELECT convo.move_head($1, '` + a + `')`,
				`SELECT convo.regenerate($1, '` + a + `', '[{"type":"text","text":"r"}]')`,
				`SELECT convo.move_head($1, '` + q2 + `')`,
				`SELECT convo.append_message($1, 'assistant', '[{"type":"text","text":"x"}]')`,
				`SELECT convo.move_head($1, '` + a + `')`,
			}
			for i, step := range steps {
				if _, err := tx.Exec(ctx, step, conv); err != nil {
					return fmt.Errorf("step %d: %w", i, err)
				}
				// As convo_app only the functions are reachable (the
				// instants query of pathAtMismatchSQL reads tables), so
				// compare at the instants of head_history.
				query := pathAtMismatchSQL
				if role != "" {
					query = `
						SELECT h.moved_at::text
						  FROM convo.head_history($1) h, (VALUES (interval '0'), (interval '-1 microsecond')) d (d),
						       LATERAL (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.ordinality), '[]') AS j
						                  FROM convo.path_at($1, h.moved_at + d.d) WITH ORDINALITY AS p) n,
						       LATERAL (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.ordinality), '[]') AS j
						                  FROM atk_old.path_at($1, h.moved_at + d.d) WITH ORDINALITY AS p) o
						 WHERE n.j IS DISTINCT FROM o.j`
				}
				rows, err := tx.Query(ctx, query, conv)
				if err != nil {
					return err
				}
				bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					return err
				}
				if len(bad) > 0 {
					return fmt.Errorf("as %q, after step %d: path_at differs at %d instants, first %s", role, i, len(bad), bad[0])
				}
			}
			return fmt.Errorf("rollback")
		})
		if err == nil || err.Error() != "rollback" {
			t.Fatalf("as %q: %v", role, err)
		}
	}
}
