package tests

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestPathAtMatchesTheTreeAtEveryInstant writes random histories through
// the API (randomHistory: appends, edits, regenerations, head moves, moves
// away and back and several in one transaction) and asks path_at for every
// instant that matters: each head move's and each message's time, a
// microsecond either side. Its rows, sibling counts included, must be those
// read from the tree as it was then: the path from head_at up to the root,
// each message's siblings counted among those created by then. The
// instants cover a head that is the head now (the live-path index) and
// heads of the past (the walk up the tree).
func TestPathAtMatchesTheTreeAtEveryInstant(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for seed := int64(1); seed <= 8; seed++ {
		conv := createConversation(t, db, fmt.Sprintf("owner-%d", seed), "")
		randomHistory(t, db, rand.New(rand.NewSource(seed)), conv, 40, true)
		bad := queryRowsAs[string](t, db, `
			WITH d (d) AS (VALUES (interval '0'), (interval '-1 microsecond'), (interval '1 microsecond')),
			inst (t) AS (
			    SELECT DISTINCT x FROM (
			        SELECT l.moved_at + d.d FROM convo.conversation_head_log l, d WHERE l.conversation_id = $1
			        UNION ALL SELECT m.created_at + d.d FROM convo.messages m, d WHERE m.conversation_id = $1) s (x))
			SELECT inst.t::text || ': path_at ' || n.j::text || ', the tree ' || o.j::text
			  FROM inst,
			       LATERAL (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.depth), '[]') AS j
			                  FROM convo.path_at($1, inst.t) p) n,
			       LATERAL (
			           WITH RECURSIVE up AS (
			               SELECT m.* FROM convo.messages m
			                WHERE m.conversation_id = $1 AND m.id = convo.head_at($1, inst.t)
			               UNION ALL
			               SELECT p.* FROM up JOIN convo.messages p ON p.conversation_id = $1 AND p.id = up.parent_id)
			           SELECT coalesce(jsonb_agg(jsonb_build_object(
			                      'depth', up.depth, 'message_id', up.id, 'parent_id', up.parent_id, 'role', up.role,
			                      'parts', up.parts, 'branch_reason', up.branch_reason, 'created_at', up.created_at,
			                      'sibling_index', up.sibling_index,
			                      'sibling_count', (SELECT count(*) FROM convo.messages s
			                                         WHERE s.conversation_id = $1 AND s.parent_id IS NOT DISTINCT FROM up.parent_id
			                                           AND s.created_at <= inst.t),
			                      'incomplete', up.incomplete) ORDER BY up.depth), '[]') AS j
			             FROM up) o
			 WHERE n.j IS DISTINCT FROM o.j
			 ORDER BY inst.t`, conv)
		if len(bad) > 0 {
			t.Fatalf("seed %d: path_at differs from the tree at %d instants, first: %s", seed, len(bad), bad[0])
		}
		requireEqual(t, fmt.Sprintf("seed %d: instants with a head of the past", seed),
			queryRow[bool](t, db, `SELECT count(DISTINCT head_message_id) > 1 FROM convo.conversation_head_log WHERE conversation_id = $1`, conv), true)
	}
}

// pickRole is a random message of role on path.
func pickRole(rng *rand.Rand, path []pathRow, role string) (string, bool) {
	var of []string
	for _, r := range path {
		if r.Role == role {
			of = append(of, r.MessageID)
		}
	}
	if len(of) == 0 {
		return "", false
	}
	return of[rng.Intn(len(of))], true
}
