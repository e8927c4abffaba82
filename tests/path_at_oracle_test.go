package tests

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// TestPathAtMatchesTheTreeAtEveryInstant writes random conversations through
// the API (appends, edits, regenerations, head moves), records the database
// clock after each call, and asks path_at for every recorded instant, and
// for the instant just before each: its rows, sibling counts included, must
// be those read from the tree as it was then: the path from head_at up to
// the root, each message's siblings counted among those created by then.
// The instants cover a head that is the head now (the live-path index) and
// heads of the past (the walk up the tree).
func TestPathAtMatchesTheTreeAtEveryInstant(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for seed := int64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewSource(seed))
		conv := createConversation(t, db, fmt.Sprintf("owner-%d", seed), "")
		var instants []time.Time
		for step := 0; step < 40; step++ {
			path := readPath(t, db, conv)
			switch op := rng.Intn(10); {
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
			default:
				all := queryRowsAs[string](t, db, `SELECT id::text FROM convo.messages WHERE conversation_id = $1`, conv)
				moveHead(t, db, conv, all[rng.Intn(len(all))])
			}
			instants = append(instants, dbNow(t, db))
		}
		for i, at := range instants {
			for _, when := range []time.Time{at, at.Add(-time.Microsecond)} {
				got := readPathAt(t, db, conv, when)
				want := queryPath(t, db, `
					WITH RECURSIVE up AS (
					    SELECT m.* FROM convo.messages m
					     WHERE m.conversation_id = $1 AND m.id = convo.head_at($1, $2)
					    UNION ALL
					    SELECT p.* FROM up JOIN convo.messages p ON p.conversation_id = $1 AND p.id = up.parent_id)
					SELECT up.depth, up.id::text, coalesce(up.parent_id::text, ''), up.role, up.parts::text,
					       coalesce(up.branch_reason, ''), up.created_at, up.sibling_index,
					       (SELECT count(*)::int FROM convo.messages s
					         WHERE s.conversation_id = $1 AND s.parent_id IS NOT DISTINCT FROM up.parent_id
					           AND s.created_at <= $2)
					  FROM up ORDER BY up.depth`, conv, when)
				requireSlice(t, fmt.Sprintf("seed %d: path_at after call %d (%s)", seed, i, when.Format(time.RFC3339Nano)), got, want)
			}
		}
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
