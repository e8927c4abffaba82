package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// story is the seed's conversation built through the API: a system prompt,
// three user turns, and in the third an assistant message with two tool
// calls, a tool message with their results, and an answer.
type story struct {
	conv                                  string
	root, u1, a1, u2, a2, u3, a3, t3, ans string
}

const (
	storyToolCalls = `[{"type": "tool_use", "id": "toolu_01", "name": "lookup_delivery", "input": {"order": 1008}},
		{"type": "tool_use", "id": "toolu_02", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]`
	storyToolResults = `[{"type": "tool_result", "tool_use_id": "toolu_01", "content": {"arrives": "Friday"}},
		{"type": "tool_result", "tool_use_id": "toolu_02", "content": {"charge": "ch_3PkQ8sJ1n4Yh2P"}, "is_error": false}]`
)

func buildStory(t testing.TB, db *pgxpool.Pool) story {
	t.Helper()
	var s story
	s.conv = createConversation(t, db, "customer-42", "You are the support assistant of a shop.")
	s.root = headOf(t, db, s.conv)
	s.u1 = appendMsg(t, db, s.conv, "user", textParts("Hi, I ordered a lamp last week."))
	s.a1 = appendMsg(t, db, s.conv, "assistant", textParts("Happy to help. What would you like to know?"))
	s.u2 = appendMsg(t, db, s.conv, "user", textParts("It is order 1008."))
	s.a2 = appendMsg(t, db, s.conv, "assistant", textParts("Got it, order 1008."))
	s.u3 = appendMsg(t, db, s.conv, "user", textParts("When does it arrive, and can you buy me 500 credits?"))
	s.a3 = appendMsg(t, db, s.conv, "assistant", storyToolCalls)
	s.t3 = appendMsg(t, db, s.conv, "tool", storyToolResults)
	s.ans = appendMsg(t, db, s.conv, "assistant", textParts("It arrives Friday, and 500 credits are on your account."))
	return s
}

// offPath returns the ids of the conversation's messages that are not on
// path, sorted, and the tool call ids of the tool_use parts among them.
func offPath(t testing.TB, db *pgxpool.Pool, conv string, path []string) (messages, toolCalls []string) {
	t.Helper()
	messages = queryRow[[]string](t, db, `
		SELECT coalesce(array_agg(id::text ORDER BY id::text), '{}') FROM convo.messages
		 WHERE conversation_id = $1 AND id::text <> ALL ($2::text[])`, conv, path)
	toolCalls = queryRow[[]string](t, db, `
		SELECT coalesce(array_agg(tool_call_id ORDER BY tool_call_id), '{}') FROM convo.message_parts
		 WHERE conversation_id = $1 AND type = 'tool_use' AND message_id::text <> ALL ($2::text[])`, conv, path)
	return messages, toolCalls
}

func sorted(s ...string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// TestEditOrphansSubtreeWithoutTouchingRows is the seed's story: an edit
// three turns back leaves U3's subtree (four messages, two tool calls) off
// the path while every existing row stays exactly as it was; a second edit
// makes three siblings; switching back restores the original path.
func TestEditOrphansSubtreeWithoutTouchingRows(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	s := buildStory(t, db)

	original := readPath(t, db, s.conv)
	requireSlice(t, "original path", ids(original), []string{s.root, s.u1, s.a1, s.u2, s.a2, s.u3, s.a3, s.t3, s.ans})
	tables := []string{"convo.messages", "convo.keyed_parts", "convo.conversation_head_log"}
	before := map[string]map[string]rowVersion{}
	for _, table := range tables {
		before[table] = rowVersions(t, db, table)
	}

	u3e := editMsg(t, db, s.conv, s.u3, textParts("When does it arrive?"))

	// Not a row touched: every old row keeps its xmin, ctid and content;
	// the edit only added its message (its one text part is in it: no keyed
	// part) and one head-log row.
	wantAdded := map[string][]string{
		"convo.messages":              {s.conv + "/" + u3e},
		"convo.keyed_parts":           nil,
		"convo.conversation_head_log": nil, // one row, whose seq we do not know
	}
	for _, table := range tables {
		added := requireRowsKept(t, table, before[table], rowVersions(t, db, table))
		if table == "convo.conversation_head_log" {
			requireEqual(t, "head-log rows added by the edit", len(added), 1)
			continue
		}
		requireSlice(t, table+" rows added by the edit", added, wantAdded[table])
	}
	if t.Failed() {
		t.FailNow()
	}

	t.Run("the subtree of U3 is off the path", func(t *testing.T) {
		path := readPath(t, db, s.conv)
		requireSlice(t, "path after the edit", ids(path), []string{s.root, s.u1, s.a1, s.u2, s.a2, u3e})
		for i := range 5 {
			requireEqual(t, fmt.Sprintf("path row %d", i), path[i], original[i])
		}
		e := path[5]
		requireEqual(t, "parent of the edit", e.ParentID, s.a2)
		requireEqual(t, "role of the edit", e.Role, "user")
		requireEqual(t, "branch_reason of the edit", e.BranchReason, "user_edit")
		requireEqual(t, "sibling_index of the edit", e.SiblingIndex, int32(2))
		requireEqual(t, "sibling_count of the edit", e.SiblingCount, int32(2))
		requireEqual(t, "parts of the edit", e.Parts, `[{"text": "When does it arrive?", "type": "text"}]`)

		orphans, toolCalls := offPath(t, db, s.conv, ids(path))
		requireSlice(t, "messages off the path", orphans, sorted(s.u3, s.a3, s.t3, s.ans))
		requireSlice(t, "tool calls off the path", toolCalls, []string{"toolu_01", "toolu_02"})
		last := readHeadHistory(t, db, s.conv)
		requireEqual(t, "last head move", last[len(last)-1], headMove{
			Seq: last[len(last)-1].Seq, HeadMessageID: u3e, PreviousHeadID: s.ans,
			MovedAt: last[len(last)-1].MovedAt, Reason: "user_edit",
		})
	})

	a3e := appendMsg(t, db, s.conv, "assistant", textParts("Friday."))

	t.Run("alternatives shows both versions of U3", func(t *testing.T) {
		alts := readAlternatives(t, db, s.conv, s.u3)
		requireEqual(t, "alternatives", len(alts), 2)
		requireEqual(t, "first", [4]any{alts[0].MessageID, alts[0].BranchReason, alts[0].OnHeadPath, alts[0].LatestLeafID},
			[4]any{s.u3, "", false, s.ans})
		requireEqual(t, "second", [4]any{alts[1].MessageID, alts[1].BranchReason, alts[1].OnHeadPath, alts[1].LatestLeafID},
			[4]any{u3e, "user_edit", true, a3e})
		// Asked of the edit, alternatives names the same siblings.
		requireSlice(t, "alternatives of the edit", readAlternatives(t, db, s.conv, u3e), alts)
	})

	u3f := editMsg(t, db, s.conv, s.u3, textParts("Where is my lamp?"))

	t.Run("a second edit gives three siblings", func(t *testing.T) {
		path := readPath(t, db, s.conv)
		requireSlice(t, "path after the second edit", ids(path), []string{s.root, s.u1, s.a1, s.u2, s.a2, u3f})
		requireEqual(t, "sibling_index", path[5].SiblingIndex, int32(3))
		requireEqual(t, "sibling_count", path[5].SiblingCount, int32(3))
		for _, r := range path[:5] {
			requireEqual(t, "sibling_count of "+r.MessageID, r.SiblingCount, int32(1))
		}
		alts := readAlternatives(t, db, s.conv, s.u3)
		got := make([]string, len(alts))
		for i, a := range alts {
			got[i] = fmt.Sprintf("%s %s %v %s", a.MessageID, a.BranchReason, a.OnHeadPath, a.LatestLeafID)
		}
		requireSlice(t, "alternatives", got, []string{
			fmt.Sprintf("%s  false %s", s.u3, s.ans),
			fmt.Sprintf("%s user_edit false %s", u3e, a3e),
			fmt.Sprintf("%s user_edit true %s", u3f, u3f),
		})
	})

	moveHead(t, db, s.conv, s.ans)

	t.Run("switching back restores the original path", func(t *testing.T) {
		path := readPath(t, db, s.conv)
		requireSlice(t, "path", withoutCounts(path), withoutCounts(original))
		for i, r := range path {
			want := int32(1)
			if i == 5 {
				want = 3 // U3 now has two edits beside it: "< 1/3 >"
			}
			requireEqual(t, "sibling_count of "+r.MessageID, r.SiblingCount, want)
		}
		requireSlice(t, "head-log reasons", reasons(readHeadHistory(t, db, s.conv)), []string{
			"create", "append", "append", "append", "append", "append", "append", "append", "append",
			"user_edit", "append", "user_edit", "switch",
		})
		// Still not a row of the original story touched.
		for _, table := range tables {
			requireRowsKept(t, table, before[table], rowVersions(t, db, table))
		}
	})
}

// TestRegenerateMakesSibling: regenerate adds a sibling of an assistant
// message (branch_reason 'regenerate') and moves the head to it.
func TestRegenerateMakesSibling(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	root := headOf(t, db, conv)
	u1 := appendMsg(t, db, conv, "user", textParts("Name a colour."))
	a1 := appendMsg(t, db, conv, "assistant", textParts("Blue."))
	a1r := regenerateMsg(t, db, conv, a1, textParts("Red."))

	path := readPath(t, db, conv)
	requireSlice(t, "path", ids(path), []string{root, u1, a1r})
	r := path[2]
	requireEqual(t, "parent", r.ParentID, u1)
	requireEqual(t, "role", r.Role, "assistant")
	requireEqual(t, "branch_reason", r.BranchReason, "regenerate")
	requireEqual(t, "sibling_index", r.SiblingIndex, int32(2))
	requireEqual(t, "sibling_count", r.SiblingCount, int32(2))
	moves := readHeadHistory(t, db, conv)
	last := moves[len(moves)-1]
	requireEqual(t, "last move", [3]string{last.HeadMessageID, last.PreviousHeadID, last.Reason}, [3]string{a1r, a1, "regenerate"})
	alts := readAlternatives(t, db, conv, a1)
	requireEqual(t, "alternatives", len(alts), 2)
	requireEqual(t, "original", [3]any{alts[0].MessageID, alts[0].BranchReason, alts[0].OnHeadPath}, [3]any{a1, "", false})
	requireEqual(t, "regenerated", [3]any{alts[1].MessageID, alts[1].BranchReason, alts[1].OnHeadPath}, [3]any{a1r, "regenerate", true})
}

// TestAppendUnderMessageWithChildrenIsBranch: a first child has no
// branch_reason; a child appended under a message that already has one is a
// 'branch'.
func TestAppendUnderMessageWithChildrenIsBranch(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
	moveHead(t, db, conv, u1)
	a1b := appendMsg(t, db, conv, "assistant", textParts("Hello there."))

	reasonOf := func(id string) string {
		return queryRow[string](t, db, `SELECT coalesce(branch_reason, 'NULL') FROM convo.messages WHERE conversation_id = $1 AND id = $2`, conv, id)
	}
	requireEqual(t, "branch_reason of the first child", reasonOf(a1), "NULL")
	requireEqual(t, "branch_reason of the second child", reasonOf(a1b), "branch")
	path := readPath(t, db, conv)
	last := path[len(path)-1]
	requireEqual(t, "head", last.MessageID, a1b)
	requireEqual(t, "parent", last.ParentID, u1)
	requireEqual(t, "sibling position", [2]int32{last.SiblingIndex, last.SiblingCount}, [2]int32{2, 2})
	moves := readHeadHistory(t, db, conv)
	requireEqual(t, "last reason", moves[len(moves)-1].Reason, "append")
}

// TestMoveHeadToCurrentHeadWritesNothing: moving the head to where it is
// writes no head-log row and does not even touch the conversation row.
func TestMoveHeadToCurrentHeadWritesNothing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	const rowVersion = `SELECT xmin::text || ctid::text FROM convo.conversations WHERE id = $1`
	version := queryRow[string](t, db, rowVersion, conv)
	before := snapshotCounts(t, db)

	moveHead(t, db, conv, u1)
	mustExec(t, db, `SELECT convo.move_head($1, $2, 'resume', $2, 'someone')`, conv, u1)

	requireUnchanged(t, db, before)
	requireEqual(t, "conversation row version", queryRow[string](t, db, rowVersion, conv), version)
}

// TestCreateConversationWithoutSystemPrompt: no system prompt, no message
// and no head; the first append makes a root.
func TestCreateConversationWithoutSystemPrompt(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "")

	requireEqual(t, "head", headOf(t, db, conv), "")
	requireEqual(t, "path length", len(readPath(t, db, conv)), 0)
	requireEqual(t, "head_history length", len(readHeadHistory(t, db, conv)), 0)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, conv)
	requireEqual(t, "metadata", queryRow[string](t, db, `SELECT metadata::text FROM convo.conversations WHERE id = $1`, conv), "{}")

	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	path := readPath(t, db, conv)
	requireSlice(t, "path", ids(path), []string{u1})
	requireEqual(t, "root", [3]any{path[0].Depth, path[0].ParentID, path[0].SiblingIndex}, [3]any{int32(0), "", int32(1)})
	moves := readHeadHistory(t, db, conv)
	requireEqual(t, "moves", len(moves), 1)
	requireEqual(t, "first move", [3]string{moves[0].HeadMessageID, moves[0].PreviousHeadID, moves[0].Reason}, [3]string{u1, "", "append"})
}

// TestRetrySafety: a call repeated with the same client id returns the
// first result and writes nothing, even after the head has moved on (a
// retried append is recognised before the p_expected_head check).
func TestRetrySafety(t *testing.T) {
	t.Parallel()

	t.Run("append_message", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		conv := createConversation(t, db, "owner-1", "You are terse.")
		root := headOf(t, db, conv)
		id, parts := newID(), textParts("Hello.")
		const call = `SELECT convo.append_message($1, 'user', $2, p_expected_head => $3, p_message_id => $4)::text`
		requireEqual(t, "first call", queryRow[string](t, db, call, conv, parts, root, id), id)
		appendMsg(t, db, conv, "assistant", textParts("Hi.")) // the head moves on

		before := snapshotCounts(t, db)
		// The same call again: its p_expected_head is stale now, yet it is a retry.
		requireEqual(t, "retry", queryRow[string](t, db, call, conv, parts, root, id), id)
		requireEqual(t, "retry without expected head", queryRow[string](t, db, call, conv, parts, nil, id), id)
		requireUnchanged(t, db, before)
	})

	t.Run("edit_and_resend", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		conv := createConversation(t, db, "owner-1", "You are terse.")
		u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
		a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
		id, parts := newID(), textParts("Hello again.")
		const call = `SELECT convo.edit_and_resend($1, $2, $3, p_expected_head => $4, p_new_message_id => $5)::text`
		requireEqual(t, "first call", queryRow[string](t, db, call, conv, u1, parts, a1, id), id)
		appendMsg(t, db, conv, "assistant", textParts("Hi again.")) // the head moves on

		before := snapshotCounts(t, db)
		requireEqual(t, "retry", queryRow[string](t, db, call, conv, u1, parts, a1, id), id)
		requireUnchanged(t, db, before)
	})

	t.Run("regenerate", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		conv := createConversation(t, db, "owner-1", "You are terse.")
		appendMsg(t, db, conv, "user", textParts("Hello."))
		a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
		id, parts := newID(), textParts("Hello!")
		const call = `SELECT convo.regenerate($1, $2, $3, p_expected_head => $4, p_new_message_id => $5)::text`
		requireEqual(t, "first call", queryRow[string](t, db, call, conv, a1, parts, a1, id), id)
		appendMsg(t, db, conv, "user", textParts("Thanks.")) // the head moves on

		before := snapshotCounts(t, db)
		requireEqual(t, "retry", queryRow[string](t, db, call, conv, a1, parts, a1, id), id)
		requireUnchanged(t, db, before)
	})

	t.Run("create_conversation", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		const call = `SELECT convo.create_conversation($1, $2, $3, $4)::text`
		for _, prompt := range []any{"You are terse.", nil} {
			id := newID()
			requireEqual(t, "first call", queryRow[string](t, db, call, "owner-1", prompt, `{"b": 1, "a": 2}`, id), id)
			appendMsg(t, db, id, "user", textParts("Hello.")) // the head moves on

			before := snapshotCounts(t, db)
			requireEqual(t, "retry", queryRow[string](t, db, call, "owner-1", prompt, `{"b": 1, "a": 2}`, id), id)
			// Canonical arguments: the same object written otherwise is the same request.
			requireEqual(t, "retry, keys reordered", queryRow[string](t, db, call, "owner-1", prompt, `{"a":2,"b":1}`, id), id)
			requireUnchanged(t, db, before)
		}
	})
}

// refNode is a message as the reference walk sees it.
type refNode struct {
	id, parent string
	createdAt  time.Time
}

// refPathRow is what path() must say about one message, computed in Go.
type refPathRow struct {
	Depth                      int32
	MessageID, ParentID        string
	CreatedAt                  time.Time
	SiblingIndex, SiblingCount int32
}

// referencePath walks from head to the root over nodes and numbers each
// message among its siblings (same parent; roots are siblings of each
// other) by creation order.
func referencePath(t testing.TB, nodes []refNode, head string) []refPathRow {
	t.Helper()
	byID := map[string]refNode{}
	children := map[string][]refNode{} // parent id ("" for roots) -> children
	for _, n := range nodes {
		byID[n.id] = n
		children[n.parent] = append(children[n.parent], n)
	}
	for parent, kids := range children {
		sort.Slice(kids, func(i, j int) bool { return kids[i].createdAt.Before(kids[j].createdAt) })
		for i := 1; i < len(kids); i++ {
			if !kids[i].createdAt.After(kids[i-1].createdAt) {
				t.Fatalf("children of %q %s and %s were created at the same instant; creation order is ambiguous",
					parent, kids[i-1].id, kids[i].id)
			}
		}
	}
	var up []refNode
	for id := head; id != ""; id = byID[id].parent {
		n, ok := byID[id]
		if !ok {
			t.Fatalf("message %s is not in the conversation", id)
		}
		up = append(up, n)
	}
	slices.Reverse(up)
	out := make([]refPathRow, len(up))
	for depth, n := range up {
		siblings := children[n.parent]
		index := slices.IndexFunc(siblings, func(s refNode) bool { return s.id == n.id })
		out[depth] = refPathRow{
			Depth: int32(depth), MessageID: n.id, ParentID: n.parent, CreatedAt: n.createdAt,
			SiblingIndex: int32(index + 1), SiblingCount: int32(len(siblings)),
		}
	}
	return out
}

// readRefNodes reads the tree as the reference walk needs it.
func readRefNodes(t testing.TB, db *pgxpool.Pool, conv string) []refNode {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT id::text, coalesce(parent_id::text, ''), created_at FROM convo.messages WHERE conversation_id = $1`, conv)
	if err != nil {
		t.Fatalf("reading messages: %v", err)
	}
	defer rows.Close()
	var out []refNode
	for rows.Next() {
		var n refNode
		if err := rows.Scan(&n.id, &n.parent, &n.createdAt); err != nil {
			t.Fatalf("scanning messages: %v", err)
		}
		n.createdAt = n.createdAt.UTC()
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reading messages: %v", err)
	}
	return out
}

// TestPathMatchesReferenceOnRandomTrees runs random appends, edits,
// regenerations and head moves, and after each one compares path() with a
// root-to-head walk computed in Go from the messages table, sibling
// numbering by creation order included. Seeds without a system prompt
// start with a user root, so edits there make sibling roots.
func TestPathMatchesReferenceOnRandomTrees(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			prompt := ""
			if seed%2 == 0 {
				prompt = "You are terse."
			}
			conv := createConversation(t, db, "owner-1", prompt)

			var all, users, assistants []string // in creation order, so the choices are deterministic
			if prompt != "" {
				all = append(all, headOf(t, db, conv))
			}
			pick := func(from []string) string { return from[rng.IntN(len(from))] }
			for step := range 50 {
				text := textParts(fmt.Sprintf("step %d", step))
				var op string
				switch r := rng.IntN(100); {
				case r < 20 && len(users) > 0:
					op = "edit"
					id := editMsg(t, db, conv, pick(users), text)
					all, users = append(all, id), append(users, id)
				case r < 35 && len(assistants) > 0:
					op = "regenerate"
					id := regenerateMsg(t, db, conv, pick(assistants), text)
					all, assistants = append(all, id), append(assistants, id)
				case r < 55 && len(all) > 0:
					op = "move_head"
					moveHead(t, db, conv, pick(all))
				default:
					op = "append"
					role := "user"
					if rng.IntN(2) == 0 {
						role = "assistant"
					}
					id := appendMsg(t, db, conv, role, text)
					all = append(all, id)
					if role == "user" {
						users = append(users, id)
					} else {
						assistants = append(assistants, id)
					}
				}

				want := referencePath(t, readRefNodes(t, db, conv), headOf(t, db, conv))
				path := readPath(t, db, conv)
				got := make([]refPathRow, len(path))
				for i, r := range path {
					got[i] = refPathRow{r.Depth, r.MessageID, r.ParentID, r.CreatedAt, r.SiblingIndex, r.SiblingCount}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("step %d (%s): path()\n %+v\nwant (computed in Go)\n %+v", step, op, got, want)
				}
			}

			// The trees must really branch, at several depths, or the
			// comparison above proved little.
			forkDepths := queryRow[int64](t, db, `
				SELECT count(DISTINCT depth) FROM convo.messages WHERE conversation_id = $1 AND sibling_index > 1`, conv)
			if forkDepths < 3 {
				t.Fatalf("the random tree branches at %d depths; want at least 3", forkDepths)
			}
		})
	}
}
