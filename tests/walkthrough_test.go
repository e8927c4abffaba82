package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The walkthrough's own ids (examples/walkthrough.sql).
const (
	wtConv = "c0000000-0000-4000-8000-000000000001"
	wtU1   = "a0000000-0000-4000-8000-000000000001"
	wtA1   = "a0000000-0000-4000-8000-000000000002"
	wtU2   = "a0000000-0000-4000-8000-000000000003"
	wtA2   = "a0000000-0000-4000-8000-000000000004"
	wtU3   = "a0000000-0000-4000-8000-000000000005"
	wtA3   = "a0000000-0000-4000-8000-000000000006" // two tool calls
	wtT3   = "a0000000-0000-4000-8000-000000000007" // their two results
	wtAns  = "a0000000-0000-4000-8000-000000000008"
	wtU3e  = "a0000000-0000-4000-8000-000000000009" // first edit of U3
	wtA3e  = "a0000000-0000-4000-8000-00000000000a"
	wtU3f  = "a0000000-0000-4000-8000-00000000000b" // second edit of U3
)

// runWalkthrough runs examples/walkthrough.sql with psql -f, as its header
// says, connected as appURL: a login member of convo_app, as an application
// (README.md's web) is. psql commits each statement outside BEGIN on its
// own, so a transaction of the file that does not name its owner first
// fails here as it fails for a reader.
func runWalkthrough(t *testing.T, appURL string) {
	t.Helper()
	script, err := os.ReadFile("../examples/walkthrough.sql")
	if err != nil {
		t.Fatalf("reading the walkthrough: %v", err)
	}
	where := make([]string, strings.Count(string(script), "\n")+1)
	for i := range where {
		where[i] = fmt.Sprintf("examples/walkthrough.sql:%d", i+1)
	}
	runPsql(t, appURL, "examples/walkthrough.sql, as a login member of convo_app", string(script), where)
}

// TestWalkthrough runs the seed's story and checks where it ends: the
// original nine messages live again, three versions of U3, and every head
// move logged in order.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app").Config().ConnString()
	runWalkthrough(t, app)

	requireEqual(t, "owner", queryRow[string](t, db, `SELECT owner_id FROM convo.conversations WHERE id = $1`, wtConv), "customer-42")
	requireEqual(t, "metadata", queryRow[string](t, db, `SELECT metadata::text FROM convo.conversations WHERE id = $1`, wtConv), `{"channel": "web"}`)
	requireCount(t, db, 12, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, wtConv)
	requireCount(t, db, 2, `SELECT count(*) FROM convo.message_parts WHERE conversation_id = $1 AND type = 'tool_use'`, wtConv)

	root := queryRow[string](t, db, `SELECT id::text FROM convo.messages WHERE conversation_id = $1 AND parent_id IS NULL`, wtConv)

	t.Run("path is the original nine messages", func(t *testing.T) {
		path := readPath(t, db, wtConv)
		requireSlice(t, "path ids", ids(path), []string{root, wtU1, wtA1, wtU2, wtA2, wtU3, wtA3, wtT3, wtAns})
		wantRoles := []string{"system", "user", "assistant", "user", "assistant", "user", "assistant", "tool", "assistant"}
		for i, r := range path {
			requireEqual(t, "depth", r.Depth, int32(i))
			requireEqual(t, "role at depth "+r.MessageID, r.Role, wantRoles[i])
			wantCount := int32(1)
			if r.MessageID == wtU3 {
				wantCount = 3 // "< 1/3 >": U3 and its two edits
			}
			requireEqual(t, "sibling_index of "+r.MessageID, r.SiblingIndex, int32(1))
			requireEqual(t, "sibling_count of "+r.MessageID, r.SiblingCount, wantCount)
			if i > 0 {
				requireEqual(t, "parent of "+r.MessageID, r.ParentID, path[i-1].MessageID)
			}
		}
		requireEqual(t, "system prompt", path[0].Parts, `[{"text": "You are the support assistant of a shop.", "type": "text"}]`)
		requireEqual(t, "answer", path[8].Parts, `[{"text": "It arrives Friday, and 500 credits are on your account.", "type": "text"}]`)
		requireEqual(t, "head", headOf(t, db, wtConv), wtAns)
	})

	t.Run("alternatives of U3 has three rows", func(t *testing.T) {
		alts := readAlternatives(t, db, wtConv, wtU3)
		if len(alts) != 3 {
			t.Fatalf("alternatives(U3): %d rows %+v, want 3", len(alts), alts)
		}
		want := []struct {
			id, reason, leaf string
			onPath           bool
		}{
			{wtU3, "", wtAns, true},
			{wtU3e, "user_edit", wtA3e, false},
			{wtU3f, "user_edit", wtU3f, false},
		}
		for i, w := range want {
			a := alts[i]
			requireEqual(t, "alternative id", a.MessageID, w.id)
			requireEqual(t, "branch_reason of "+w.id, a.BranchReason, w.reason)
			requireEqual(t, "on_head_path of "+w.id, a.OnHeadPath, w.onPath)
			requireEqual(t, "latest_leaf_id of "+w.id, a.LatestLeafID, w.leaf)
		}
	})

	t.Run("head_history has every move in order", func(t *testing.T) {
		moves := readHeadHistory(t, db, wtConv)
		requireSlice(t, "reasons", reasons(moves), []string{
			"create", "append", "append", "append", "append", "append", "append", "append", "append",
			"user_edit", "append", "user_edit", "switch",
		})
		heads := make([]string, len(moves))
		for i, m := range moves {
			heads[i] = m.HeadMessageID
		}
		requireSlice(t, "heads", heads, []string{
			root, wtU1, wtA1, wtU2, wtA2, wtU3, wtA3, wtT3, wtAns, wtU3e, wtA3e, wtU3f, wtAns,
		})
		requireHeadChain(t, moves)
	})

	t.Run("running it again writes nothing", func(t *testing.T) {
		// Every write in the script names its own id, so a second run is a
		// retry of each call; the final move_head finds the head in place.
		before := snapshotCounts(t, db)
		runWalkthrough(t, app)
		requireUnchanged(t, db, before)
	})
}
