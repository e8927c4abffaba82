package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// The mutation half of TestRestoreProperty (restore_property_test.go): an
// export changed one field at a time.

// rpMutation is one changed document: its name (the path and the new
// value), the document, and the words that name the changed row (any one
// of them in the refusal will do; none: the conversation itself).
type rpMutation struct {
	name string
	doc  string
	row  []string
	tool bool // a change to a tool's registration or to which tool a row names
	// anyRow names every row of the document, and for a removed row or the
	// conversation its array ("messages:"), by which a rule between rows
	// may name where it breaks.
	anyRow []string
}

// rpTimeLayout is how an export spells a time (UTC, trailing zeros of the
// fraction dropped, as PostgreSQL prints it).
const rpTimeLayout = "2006-01-02T15:04:05.999999-07:00"

// rpValues are the values a field of that name takes in some history: a
// mutation to one of them is a row the API might have written elsewhere.
var rpValues = map[string][]any{
	"reason":        {"append", "switch", "user_edit", "regenerate", "import", "create", "direct_update", "undo"},
	"branch_reason": {nil, "user_edit", "regenerate", "import"},
	"decision":      {"execute", "confirm", "reuse", "replay", "rejected"},
	"state":         {"requested", "awaiting_confirmation", "pending", "applied", "failed", "compensated", "declined", "streaming", "completed", "cancelled"},
	"to_state":      {"requested", "awaiting_confirmation", "pending", "applied", "failed", "compensated", "declined"},
	"from_state":    {nil, "requested", "awaiting_confirmation", "pending", "applied", "failed", "compensated", "declined"},
	"role":          {"system", "user", "assistant", "tool"},
	"format":        {"chatgpt", "openwebui", "librechat", "pgconvo"},
	"field":         {"title", "archived"},
	"place":         {"messages", "generations", "tool_effects", "tool_effect_events", "conversations", "conversation_changes", "receipts"},
	"error_code":    {nil, "card_declined", "invalid_arguments", "overloaded"},
	"finish_reason": {nil, "stop", "length"},
	"source":        {"chatgpt", "openwebui", "librechat"},
}

// rpWhoColumns are the who-columns: a mutation names someone else, no one,
// or the empty name.
var rpWhoColumns = map[string]bool{"moved_by": true, "actor": true, "confirmed_by": true, "compensated_by": true,
	"changed_by": true, "erased_by": true, "imported_by": true, "owner_id": true}

// rpMutations returns up to n mutations of doc, spread over its arrays:
// every candidate is listed, grouped by array, and the groups are drawn
// from in turn.
func rpMutations(doc string, rng *rand.Rand, n int) []rpMutation {
	x := rpDecode(doc)
	ids := rpIDs(x)
	created, _ := time.Parse(rpTimeLayout, x["conversation"].(map[string]any)["created_at"].(string))
	now := time.Now().UTC()

	type candidate struct {
		name string
		row  []string
		edit func(x map[string]any)
	}
	groups := map[string][]candidate{}
	add := func(group, name string, row []string, edit func(x map[string]any)) {
		groups[group] = append(groups[group], candidate{name, row, edit})
	}

	// Field changes: at is the row's place (its path in the document), get
	// finds the row in a fresh copy.
	fieldChanges := func(group, at string, row []string, r map[string]any, get func(x map[string]any) map[string]any) {
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			variants := rpVariants(k, r[k], ids, created, now)
			if strings.HasSuffix(k, "_id") || k == "head_at_begin" {
				// Another id of the same row: an answer that is its own
				// prompt, an effect that repeats itself.
				for _, other := range keys {
					if other != k && r[other] != nil && r[other] != r[k] && (strings.HasSuffix(other, "_id") || other == "id" || other == "head_at_begin") {
						if id, isText := r[other].(string); isText && rpUUID.MatchString(id) {
							variants = append(variants, r[other])
						}
					}
				}
			}
			for _, v := range variants {
				k, v := k, v
				names := row
				if k == "seq" || k == "tool_call_id" || k == "message_id" || k == "name" {
					// The row is named by the field changed: the refusal may
					// name it by its new value, or, the value gone, by its array.
					names = append(append(rpRowNames(group, map[string]any{k: v}), row...), group+":")
				}
				add(group, fmt.Sprintf("%s.%s = %s", at, k, rpShow(v)), names, func(x map[string]any) { get(x)[k] = v })
			}
		}
	}
	conv := x["conversation"].(map[string]any)
	fieldChanges("conversation", "conversation", []string{conv["id"].(string)}, conv, func(x map[string]any) map[string]any {
		return x["conversation"].(map[string]any)
	})
	keys := make([]string, 0, len(x))
	for k, v := range x {
		if _, ok := v.([]any); ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		for i, r := range rows(x, key) {
			key, i := key, i
			at := fmt.Sprintf("%s[%d]", key, i)
			row := rpRowNames(key, r)
			get := func(x map[string]any) map[string]any { return rows(x, key)[i] }
			fieldChanges(key, at, row, r, get)
			// A message's text: other words (any the API takes), or an
			// erased part given back its text (content erasure removed).
			if parts, ok := r["parts"].([]any); ok && key == "messages" {
				for j, p := range parts {
					j := j
					part, ok := p.(map[string]any)
					if !ok || part["type"] != "text" {
						continue
					}
					name, text := fmt.Sprintf("%s.parts[%d].text = other words", at, j), "Other words."
					if part["erased"] == true {
						name, text = fmt.Sprintf("%s.parts[%d] unerased", at, j), "The erased words."
					}
					add(key, name, row, func(x map[string]any) {
						q := rpCopy(rows(x, key)[i]["parts"].([]any)[j].(map[string]any))
						delete(q, "erased")
						q["text"] = text
						rows(x, key)[i]["parts"].([]any)[j] = q
					})
					break
				}
			}
			// Erasure places are rows of their own within the erasure.
			if places, ok := r["places"].([]any); ok {
				for j := range places {
					j := j
					p := places[j].(map[string]any)
					fieldChanges(key, fmt.Sprintf("%s.places[%d]", at, j), row, p, func(x map[string]any) map[string]any {
						return rows(x, key)[i]["places"].([]any)[j].(map[string]any)
					})
					add(key, fmt.Sprintf("%s.places[%d] removed", at, j), row, func(x map[string]any) {
						ps := rows(x, key)[i]["places"].([]any)
						rows(x, key)[i]["places"] = append(append([]any{}, ps[:j]...), ps[j+1:]...)
					})
				}
			}
			add(key, at+" removed", row, func(x map[string]any) {
				arr := x[key].([]any)
				x[key] = append(append([]any{}, arr[:i]...), arr[i+1:]...)
			})
		}
	}
	// Origins: one for a message written here (not imported), which would
	// free it from the time checks an imported message is spared, alone
	// and with its time before the conversation began.
	imported := map[any]bool{}
	for _, o := range rows(x, "origins") {
		imported[o["message_id"]] = true
	}
	source := "chatgpt"
	for _, imp := range rows(x, "imports") {
		source = fmt.Sprint(imp["format"])
	}
	for i, m := range rows(x, "messages") {
		if imported[m["id"]] {
			continue
		}
		i := i
		id := m["id"].(string)
		origin := func(x map[string]any) {
			x["origins"] = append(x["origins"].([]any), map[string]any{"message_id": id, "source": source,
				"node_key": fmt.Sprintf("forged-%d", i), "node": map[string]any{"id": fmt.Sprintf("forged-%d", i)}})
		}
		add("origins", fmt.Sprintf("origin (%s) added for messages[%d], written here", source, i), []string{id}, origin)
		add("origins", fmt.Sprintf("origin (%s) added for messages[%d], written here, dated before the conversation", source, i),
			[]string{id}, func(x map[string]any) {
				origin(x)
				rows(x, "messages")[i]["created_at"] = created.Add(-24 * time.Hour).Format(rpTimeLayout)
			})
	}

	var all []string
	for _, key := range keys {
		for _, r := range rows(x, key) {
			all = append(all, rpRowNames(key, r)...)
		}
	}

	// The conversation's own times at their bounds go into every sample:
	// one row, whose times bound every other.
	var out []rpMutation
	keep := groups["conversation"][:0]
	for _, c := range groups["conversation"] {
		bound := false
		for _, v := range []string{"-infinity", "infinity", created.Add(-24 * time.Hour).Format(rpTimeLayout), now.Add(24 * time.Hour).Format(rpTimeLayout)} {
			bound = bound || strings.HasSuffix(c.name, "_at = "+rpShow(v))
		}
		if bound && n > 0 {
			y := rpDecode(doc)
			c.edit(y)
			b, _ := json.Marshal(y)
			out = append(out, rpMutation{name: c.name, doc: string(b), row: c.row, anyRow: append(append([]string{}, all...), "conversation:")})
			continue
		}
		keep = append(keep, c)
	}
	groups["conversation"] = keep

	// Draw: the groups in turn, a random candidate of each.
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for len(out) < n {
		drawn := false
		for _, g := range names {
			if len(out) >= n || len(groups[g]) == 0 {
				continue
			}
			k := rng.IntN(len(groups[g]))
			c := groups[g][k]
			groups[g] = append(groups[g][:k], groups[g][k+1:]...)
			y := rpDecode(doc)
			c.edit(y)
			b, err := json.Marshal(y)
			if err != nil {
				panic(err)
			}
			m := rpMutation{name: c.name, doc: string(b), row: c.row, anyRow: all,
				tool: g == "tools" || strings.Contains(c.name, ".tool_")}
			if g == "conversation" || strings.HasSuffix(c.name, " removed") {
				m.anyRow = append(append([]string{}, all...), g+":")
			}
			out = append(out, m)
			drawn = true
		}
		if !drawn {
			break
		}
	}
	return out
}

// rpVariants are the values field k (now v) is changed to.
func rpVariants(k string, v any, ids rpIDSet, created, now time.Time) []any {
	var out []any
	switch {
	case k == "source_seq" || k == "import_id":
		// assigned by the restore
	case k == "scope_key" || k == "idempotency_key":
		if s, ok := v.(string); ok {
			out = append(out, "forged:"+strings.Repeat("0", 64))
			for _, other := range ids.keys {
				if other != s {
					out = append(out, other)
					break
				}
			}
		}
	case strings.HasSuffix(k, "_at") || k == "at":
		if s, ok := v.(string); ok {
			t, err := time.Parse(rpTimeLayout, s)
			if err != nil {
				return nil
			}
			out = append(out, t.Add(-time.Hour).Format(rpTimeLayout), t.Add(time.Hour).Format(rpTimeLayout),
				t.Add(-time.Microsecond).Format(rpTimeLayout), t.Add(time.Microsecond).Format(rpTimeLayout),
				"-infinity", "infinity", created.Add(-24*time.Hour).Format(rpTimeLayout), now.Add(24*time.Hour).Format(rpTimeLayout), nil)
		} else if v == nil {
			out = append(out, created.Add(time.Second).Format(rpTimeLayout), now.Add(-time.Second).Format(rpTimeLayout))
		}
	case rpWhoColumns[k]:
		out = append(out, "mallory", "", nil)
	case rpValues[k] != nil:
		for _, w := range rpValues[k] {
			if w != v {
				out = append(out, w)
			}
		}
	case k == "effect_id" || k == "repeats_effect_id":
		out = append(out, nil)
		out = append(out, ids.others(ids.effects, v)...)
	case k == "message_id" || k == "parent_id" || k == "head_message_id" || k == "previous_head_id" ||
		k == "prompt_message_id" || k == "head_at_begin" || k == "fork_point_id" || k == "branch_id":
		out = append(out, nil)
		out = append(out, ids.others(ids.messages, v)...)
	case k == "tool_call_id":
		out = append(out, "call_forged")
		out = append(out, ids.others(ids.calls, v)...)
	default:
		switch w := v.(type) {
		case json.Number:
			n, err := w.Int64()
			if err != nil {
				return []any{json.Number("0")}
			}
			out = append(out, json.Number(fmt.Sprint(n+1)), json.Number(fmt.Sprint(n-1)), json.Number("0"), json.Number("-1"),
				json.Number("100001"), nil)
			if k == "http_status" {
				out = append(out, json.Number("99"), json.Number("600"), json.Number("200"))
			}
		case bool:
			out = append(out, !w)
		case string:
			if k != "id" {
				out = append(out, w+"x", nil)
			}
		case nil:
			if k == "amount_minor" || k == "http_status" || k == "tool_version" {
				out = append(out, json.Number("1"))
			} else if k != "title" {
				out = append(out, "x")
			}
		}
	}
	return out
}

// rpIDSet is the ids a document holds, to relink a row to another.
type rpIDSet struct {
	messages, effects, calls, keys []string
}

func rpIDs(x map[string]any) rpIDSet {
	var s rpIDSet
	for _, m := range rows(x, "messages") {
		s.messages = append(s.messages, m["id"].(string))
	}
	for _, e := range rows(x, "effects") {
		s.effects = append(s.effects, e["id"].(string))
		if k, ok := e["idempotency_key"].(string); ok {
			s.keys = append(s.keys, k)
		}
	}
	for _, c := range rows(x, "tool_calls") {
		s.calls = append(s.calls, c["tool_call_id"].(string))
	}
	return s
}

// others returns up to two ids of from other than v: the neighbours of v,
// so that a relink stays near (a parent, the next effect).
func (rpIDSet) others(from []string, v any) []any {
	var out []any
	for i, id := range from {
		if id == v {
			if i > 0 {
				out = append(out, from[i-1])
			}
			if i+1 < len(from) {
				out = append(out, from[i+1])
			}
			return out
		}
	}
	if len(from) > 0 {
		out = append(out, from[0])
	}
	return out
}

// rpRowNames are the words by which a refusal names a row of key.
func rpRowNames(key string, r map[string]any) []string {
	var out []string
	for _, f := range []string{"id", "tool_call_id", "message_id", "name"} {
		if s, ok := r[f].(string); ok && s != "" {
			out = append(out, s)
		}
	}
	if seq, ok := r["seq"]; ok && seq != nil {
		out = append(out, fmt.Sprintf("seq %v", seq))
	}
	return out
}

func rpDecode(doc string) map[string]any {
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var x map[string]any
	if err := d.Decode(&x); err != nil {
		panic(err)
	}
	return x
}

func rpCopy(r map[string]any) map[string]any {
	c := map[string]any{}
	for k, v := range r {
		c[k] = v
	}
	return c
}

func rpShow(v any) string {
	if v == nil {
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
