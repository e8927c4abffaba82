package tests

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Helpers for the import tests (import_test.go): the sample files, a model
// of what each says (computed from its JSON, by the rules of
// docs/importing.md, "The rules", never written by hand), and what the database holds.

// sampleDirs are the folders of real chat exports the import tests read:
// ../shared/samples from the repository root (the tests run in tests/),
// read in place (sampleCorpora, corpus_test.go).
var sampleDirs = []string{chatImportsCorpus.path, chatExportsCorpus.path}

// importSample is one conversation of a sample file: its format (chatgpt,
// openwebui or librechat), its name (file#index) and its JSON, decoded with
// json.Number.
type importSample struct {
	name, format string
	doc          map[string]any
}

// readSamples returns every conversation of every sample file, and the
// files that hold none of the formats. Without the samples beside the
// clone, the test is skipped (requireCorpus).
func readSamples(t testing.TB) (samples []importSample, other []string) {
	t.Helper()
	requireCorpus(t, sampleCorpora...)
	for _, dir := range sampleDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no sample files in %s (%v): the tests read ../shared/samples", dir, err)
		}
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			v := decodeSample(t, body)
			elems, ok := v.([]any)
			if !ok {
				elems = []any{v}
			}
			found := false
			for i, e := range elems {
				m, _ := e.(map[string]any)
				format := sampleFormat(m)
				if format == "" {
					continue
				}
				found = true
				samples = append(samples, importSample{name: filepath.Base(f) + "#" + strconv.Itoa(i), format: format, doc: m})
			}
			if !found {
				other = append(other, filepath.Base(f))
			}
		}
	}
	return samples, other
}

// sampleFormat: chatgpt for an object with a mapping, openwebui for a chat
// row (an object "chat") or a chat column (an object "history"), librechat
// for any other object with a list "messages" (LibreChat's own export).
func sampleFormat(m map[string]any) string {
	switch {
	case m == nil:
		return ""
	case m["mapping"] != nil:
		return "chatgpt"
	case isObject(m["chat"]) || isObject(m["history"]):
		return "openwebui"
	case isArray(m["messages"]):
		return "librechat"
	}
	return ""
}

func isArray(v any) bool { _, ok := v.([]any); return ok }

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// decodeSample decodes with json.Number, so numbers survive a round trip digit for digit.
func decodeSample(t testing.TB, body []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding sample: %v", err)
	}
	return v
}

// encodeJSON is v as JSON text.
func encodeJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cloneJSON is a deep copy of a decoded document, for mutations.
func cloneJSON(t testing.TB, v map[string]any) map[string]any {
	t.Helper()
	return decodeSample(t, []byte(encodeJSON(t, v))).(map[string]any)
}

// derivedID is md5(text)::uuid, as the import derives its ids.
func derivedID(text string) string {
	s := md5.Sum([]byte(text))
	h := hex.EncodeToString(s[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// nodeID is the id of the message imported from the node key in conv (its
// origin's): an imported message's id is a keyed digest of its content and
// parent (docs/importing.md, "Ids"), found here by its node.
func nodeID(t testing.TB, db *pgxpool.Pool, conv, key string) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT message_id::text FROM convo.import_origins WHERE conversation_id = $1 AND node_key = $2`, conv, key)
}

// importedID is the id an import gives the conversation of source in format
// for owner: the keyed digest (HMAC-SHA256 under the database's secret,
// convo_private.keyed_digest, read here as a superuser) of the SHA-256 of
// the jsonb text of the array [format, owner, source], its first 32 hex
// digits as a uuid (docs/importing.md, "Ids").
func importedID(t testing.TB, db *pgxpool.Pool, format, owner, source string) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT left(convo_private.keyed_digest(encode(sha256(convert_to(
		jsonb_build_array($1::text, $2::text, $3::text)::text, 'UTF8')), 'hex')), 32)::uuid::text`, format, owner, source)
}

// srcTree is a sample conversation read as the import reads it.
type srcTree struct {
	format   string
	nodes    map[string]map[string]any
	current  string // "" when absent or null
	convTime *float64
	source   string
}

func newSrcTree(t testing.TB, format string, doc map[string]any) srcTree {
	t.Helper()
	s := srcTree{format: format, nodes: map[string]map[string]any{}}
	var mapping map[string]any
	switch format {
	case "chatgpt":
		mapping, _ = doc["mapping"].(map[string]any)
		s.current, _ = doc["current_node"].(string)
		s.convTime = number(doc["create_time"])
		s.source = firstNonEmpty(doc["conversation_id"], doc["id"])
	case "openwebui":
		row, chat := map[string]any(nil), doc
		if c, ok := doc["chat"].(map[string]any); ok {
			row, chat = doc, c
		}
		history, _ := chat["history"].(map[string]any)
		mapping, _ = history["messages"].(map[string]any)
		s.current, _ = history["currentId"].(string)
		s.convTime = msTime(number(row["created_at"]))
		if s.convTime == nil {
			s.convTime = msTime(number(chat["timestamp"]))
		}
		s.source = firstNonEmpty(row["id"], chat["id"])
	case "librechat":
		// The messages by messageId; a recursive export's children are
		// messages too. The conversation's time is the earliest createdAt.
		recursive := doc["recursive"] == true
		var walk func(list []any)
		walk = func(list []any) {
			for _, e := range list {
				m, _ := e.(map[string]any)
				id, _ := m["messageId"].(string)
				if m == nil || id == "" {
					t.Fatalf("a LibreChat message without a messageId: %v", e)
				}
				s.nodes[id] = m
				if kids, ok := m["children"].([]any); ok && recursive {
					walk(kids)
				}
			}
		}
		list, _ := doc["messages"].([]any)
		walk(list)
		for k := range s.nodes {
			if at := s.ownTime(k); at != nil && (s.convTime == nil || *at < *s.convTime) {
				s.convTime = at
			}
		}
		s.source = firstNonEmpty(doc["conversationId"])
	}
	for k, v := range mapping {
		m, _ := v.(map[string]any)
		s.nodes[k] = m
	}
	return s
}

// zeroUUID is LibreChat's parentMessageId of a root.
const zeroUUID = "00000000-0000-0000-0000-000000000000"

// isoTime reads an ISO 8601 time (with an offset or Z; without one, UTC)
// as epoch seconds.
func isoTime(v any) *float64 {
	str, _ := v.(string)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if at, err := time.Parse(layout, str); err == nil {
			f := float64(at.UnixMicro()) / 1e6
			return &f
		}
	}
	return nil
}

func firstNonEmpty(vs ...any) string {
	for _, v := range vs {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func number(v any) *float64 {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	f, err := n.Float64()
	if err != nil {
		return nil
	}
	return &f
}

// msTime reads Open WebUI's times: above 10^11, milliseconds.
func msTime(f *float64) *float64 {
	if f != nil && *f > 1e11 {
		v := *f / 1000
		return &v
	}
	return f
}

func (s srcTree) message(k string) map[string]any {
	if s.format != "chatgpt" {
		return s.nodes[k]
	}
	m, _ := s.nodes[k]["message"].(map[string]any)
	return m
}

func (s srcTree) parent(k string) string {
	p, _ := s.nodes[k][map[string]string{"chatgpt": "parent", "openwebui": "parentId", "librechat": "parentMessageId"}[s.format]].(string)
	if s.format == "librechat" && p == zeroUUID {
		return ""
	}
	return p
}

func (s srcTree) ownTime(k string) *float64 {
	switch s.format {
	case "openwebui":
		return msTime(number(s.nodes[k]["timestamp"]))
	case "librechat":
		return isoTime(s.nodes[k]["createdAt"])
	}
	return number(s.message(k)["create_time"])
}

func (s srcTree) role(k string) string {
	m := s.message(k)
	switch s.format {
	case "openwebui":
		r, _ := m["role"].(string)
		return r
	case "librechat": // sender is a label, not a role
		if m["isCreatedByUser"] == true {
			return "user"
		}
		return "assistant"
	}
	author, _ := m["author"].(map[string]any)
	role, _ := author["role"].(string)
	content, _ := m["content"].(map[string]any)
	recipient, _ := m["recipient"].(string)
	switch {
	case role == "assistant" && recipient != "" && recipient != "all":
		return "assistant"
	case content["content_type"] == "user_editable_context" || content["content_type"] == "model_editable_context":
		return "system"
	}
	return role
}

// treeFacts is what a conversation's tree says: counts, the head and the
// path from the root to the head ("key role"), with each path message's
// time in epoch seconds (NaN: the import's own time).
type treeFacts struct {
	Messages, Roots, Leaves, BranchPoints int
	Head                                  string
	Path                                  []string
	Times                                 []float64
}

// expectTree computes the facts from the source alone: imported nodes are
// those with a message; each hangs under its nearest imported ancestor;
// a time is the node's own, else its imported parent's, else the
// conversation's; the head is the nearest imported node at or above the
// current node, else the latest leaf by (time, key).
func expectTree(t testing.TB, s srcTree) treeFacts {
	t.Helper()
	nearest := func(k string) string { // the nearest imported node at or above k
		for steps := 0; k != "" && s.message(k) == nil; steps++ {
			if steps > len(s.nodes) {
				t.Fatalf("the sample has a cycle at %s", k)
			}
			k = s.parent(k)
		}
		return k
	}
	impParent := map[string]string{}
	for k := range s.nodes {
		if s.message(k) != nil {
			impParent[k] = nearest(s.parent(k))
		}
	}
	times := map[string]float64{}
	var timeOf func(k string, depth int) float64
	timeOf = func(k string, depth int) float64 {
		if v, ok := times[k]; ok {
			return v
		}
		if depth > len(s.nodes) {
			t.Fatalf("the sample has a cycle at %s", k)
		}
		v := math.NaN()
		switch own := s.ownTime(k); {
		case own != nil:
			v = *own
		case impParent[k] != "":
			v = timeOf(impParent[k], depth+1)
		case s.convTime != nil:
			v = *s.convTime
		}
		times[k] = v
		return v
	}
	var f treeFacts
	children := map[string]int{}
	for k, p := range impParent {
		timeOf(k, 0)
		f.Messages++
		if p == "" {
			f.Roots++
		} else {
			children[p]++
		}
	}
	var leaves []string
	for k := range impParent {
		switch children[k] {
		case 0:
			f.Leaves++
			leaves = append(leaves, k)
		case 1:
		default:
			f.BranchPoints++
		}
	}
	f.Head = nearest(s.current)
	if f.Head == "" && len(leaves) > 0 {
		at := func(k string) float64 { // the import's own time is the latest
			if math.IsNaN(times[k]) {
				return math.Inf(1)
			}
			return times[k]
		}
		sort.Slice(leaves, func(i, j int) bool {
			if at(leaves[i]) != at(leaves[j]) {
				return at(leaves[i]) > at(leaves[j])
			}
			return leaves[i] > leaves[j]
		})
		f.Head = leaves[0]
	}
	for k := f.Head; k != ""; k = impParent[k] {
		f.Path = append([]string{k + " " + s.role(k)}, f.Path...)
		f.Times = append([]float64{times[k]}, f.Times...)
	}
	return f
}

// storedTree reads the same facts from the database (node keys from
// import_origins).
func storedTree(t testing.TB, db *pgxpool.Pool, conv string) treeFacts {
	t.Helper()
	var f treeFacts
	counts := queryRow[[]int64](t, db, `
		SELECT ARRAY[count(*), count(*) FILTER (WHERE m.parent_id IS NULL),
		             count(*) FILTER (WHERE c.n IS NULL), count(*) FILTER (WHERE c.n >= 2)]
		  FROM convo.messages m
		  LEFT JOIN (SELECT parent_id, count(*) AS n FROM convo.messages WHERE conversation_id = $1 GROUP BY parent_id) c
		    ON c.parent_id = m.id
		 WHERE m.conversation_id = $1`, conv)
	f.Messages, f.Roots, f.Leaves, f.BranchPoints = int(counts[0]), int(counts[1]), int(counts[2]), int(counts[3])
	f.Head = queryRow[string](t, db, `SELECT coalesce((SELECT o.node_key FROM convo.conversations c
		JOIN convo.import_origins o ON o.conversation_id = c.id AND o.message_id = c.head_message_id WHERE c.id = $1), '')`, conv)
	f.Path = queryRowsAs[string](t, db, `SELECT o.node_key || ' ' || p.role FROM convo.path($1) p
		JOIN convo.import_origins o ON o.conversation_id = $1 AND o.message_id = p.message_id ORDER BY p.depth`, conv)
	f.Times = queryRowsAs[float64](t, db, `SELECT extract(epoch FROM p.created_at)::float8 FROM convo.path($1) p ORDER BY p.depth`, conv)
	return f
}

// requireTree compares the facts, times within a microsecond (NaN: any time).
func requireTree(t testing.TB, got, want treeFacts) {
	t.Helper()
	requireEqual(t, "messages", got.Messages, want.Messages)
	requireEqual(t, "roots", got.Roots, want.Roots)
	requireEqual(t, "leaves", got.Leaves, want.Leaves)
	requireEqual(t, "branch points", got.BranchPoints, want.BranchPoints)
	requireEqual(t, "head", got.Head, want.Head)
	requireSlice(t, "path from the root to the head", got.Path, want.Path)
	if len(got.Times) != len(want.Times) {
		t.Fatalf("path times: %d, want %d", len(got.Times), len(want.Times))
	}
	for i := range want.Times {
		if !math.IsNaN(want.Times[i]) && math.Abs(got.Times[i]-want.Times[i]) > 1.5e-6 {
			t.Errorf("time of %s: %.6f, want %.6f", want.Path[i], got.Times[i], want.Times[i])
		}
	}
}

// keyedSource is the source key of a document without an id of its own:
// 'sha:' and the keyed digest of its jsonb text (docs/importing.md, "Ids").
func keyedSource(t testing.TB, db *pgxpool.Pool, doc string) string {
	t.Helper()
	return queryRow[string](t, db, `SELECT 'sha:' || convo_private.keyed_digest(encode(sha256(convert_to($1::jsonb::text, 'UTF8')), 'hex'))`, doc)
}
