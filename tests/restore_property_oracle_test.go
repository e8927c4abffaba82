package tests

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The oracle of TestRestoreProperty (restore_property_test.go): rules every
// history written through the API keeps, which neither self_check nor a
// re-export can see (a time at infinity reads back as it was written). A
// restored document that breaks one is a history the API could not have
// written. The test holds the oracle to every document the API wrote, so
// that a rule too strict fails there, as a test bug.

// rpAPIProblem returns the first rule x breaks, or "". now bounds every
// time: nothing the API wrote is later than the moment it is checked.
func rpAPIProblem(x map[string]any, now time.Time) string {
	conv := x["conversation"].(map[string]any)
	times := map[string]time.Time{}
	parse := func(what string, v any) (time.Time, string) {
		s, ok := v.(string)
		if !ok {
			return time.Time{}, ""
		}
		t, err := time.Parse(rpTimeLayout, s)
		if err != nil {
			return time.Time{}, fmt.Sprintf("%s is %q, not a finite time", what, s)
		}
		times[what] = t
		return t, ""
	}
	// Every time is finite.
	if p := rpEachTime(x, parse); p != "" {
		return p
	}
	created, _ := parse("conversation.created_at", conv["created_at"])
	last, _ := parse("conversation.last_activity_at", conv["last_activity_at"])

	// What an import wrote: the messages with an origin, which must be
	// messages an import of that format wrote.
	imports := map[any]string{}
	formats := map[string]bool{}
	for _, r := range rows(x, "imports") {
		imports[r["id"]] = fmt.Sprint(r["format"])
		formats[fmt.Sprint(r["format"])] = true
	}
	msgs := map[any]map[string]any{}
	for _, m := range rows(x, "messages") {
		msgs[m["id"]] = m
	}
	imported := map[any]bool{}
	for _, o := range rows(x, "origins") {
		m := msgs[o["message_id"]]
		if m == nil {
			return fmt.Sprintf("origin of %v: no such message", o["message_id"])
		}
		// The message names the import that wrote it (or, restored, the
		// restore that carried it), and an import of the origin's format
		// is on record.
		f, ok := imports[m["import_id"]]
		if !ok || !formats[fmt.Sprint(o["source"])] || (f != fmt.Sprint(o["source"]) && f != "pgconvo") {
			return fmt.Sprintf("origin of message %v (source %v): the message was not written by an import of that format (import_id %v)",
				o["message_id"], o["source"], m["import_id"])
		}
		imported[o["message_id"]] = true
	}
	log := rows(x, "head_log")
	sortBySeq(log)
	createdHere := len(log) > 0 && log[0]["reason"] == "create"

	at := func(r map[string]any, k string) (time.Time, bool) {
		s, ok := r[k].(string)
		if !ok {
			return time.Time{}, false
		}
		t, err := time.Parse(rpTimeLayout, s)
		return t, err == nil
	}
	// Nothing written here is after now, nor, in a conversation created
	// here, before it; its last activity is between.
	if last.After(now) {
		return fmt.Sprintf("conversation.last_activity_at %s is after now", conv["last_activity_at"])
	}
	if createdHere {
		if created.After(now) {
			return fmt.Sprintf("conversation.created_at %s is after now", conv["created_at"])
		}
		if last.Before(created) {
			return fmt.Sprintf("conversation.last_activity_at %s is before created_at %s", conv["last_activity_at"], conv["created_at"])
		}
		for what, t := range times {
			if t.Before(created) && what != "conversation.created_at" {
				return fmt.Sprintf("%s %s is before the conversation was created (%s)", what, t.Format(rpTimeLayout), conv["created_at"])
			}
		}
	}
	// Every time but an imported one (a source's clock) and a deadline
	// (ahead by the tool's) is now or before.
	for what, t := range times {
		if t.After(now) && !strings.HasSuffix(what, ".deadline_at") && !strings.HasPrefix(what, "messages[") &&
			(createdHere || what != "conversation.created_at") {
			return fmt.Sprintf("%s %s is after now", what, t.Format(rpTimeLayout))
		}
	}
	// A deadline is the tool's, from the request or the confirmation.
	deadlines := map[string]time.Duration{}
	for _, tool := range rows(x, "tools") {
		if d, ok := rpDuration(fmt.Sprint(tool["deadline"])); ok {
			deadlines[fmt.Sprintf("%v/%v", tool["name"], tool["version"])] = d
		}
	}
	for _, e := range rows(x, "effects") {
		d, ok := deadlines[fmt.Sprintf("%v/%v", e["tool_name"], e["tool_version"])]
		from, fromOK := at(e, "confirmed_at")
		if !fromOK {
			from, fromOK = at(e, "requested_at")
		}
		if dl, dlOK := at(e, "deadline_at"); ok && fromOK && dlOK && !dl.Equal(from.Add(d)) {
			return fmt.Sprintf("effect %v: deadline_at %v is not its tool's deadline after %s", e["id"], e["deadline_at"], from.Format(rpTimeLayout))
		}
	}
	for _, m := range rows(x, "messages") {
		if imported[m["id"]] {
			continue
		}
		if t, ok := at(m, "created_at"); ok && t.After(now) {
			return fmt.Sprintf("message %v, written here, is dated %s, after now", m["id"], m["created_at"])
		}
		if p := msgs[m["parent_id"]]; p != nil && !imported[p["id"]] {
			pt, _ := at(p, "created_at")
			if t, ok := at(m, "created_at"); ok && t.Before(pt) {
				return fmt.Sprintf("message %v, written here, is dated before its parent %v", m["id"], p["id"])
			}
		}
	}
	// The head log and the change log are in time order.
	for _, key := range []string{"head_log", "changes", "effect_events"} {
		rs := rows(x, key)
		sortBySeq(rs)
		field := map[string]string{"head_log": "moved_at", "changes": "changed_at", "effect_events": "at"}[key]
		for i := 1; i < len(rs); i++ {
			a, _ := at(rs[i-1], field)
			b, _ := at(rs[i], field)
			if b.Before(a) {
				return fmt.Sprintf("%s: seq %v is dated before seq %v", key, rs[i]["seq"], rs[i-1]["seq"])
			}
		}
	}
	// Effects: events not before the request; calls not before their
	// message when it was written here.
	requested := map[any]time.Time{}
	for _, e := range rows(x, "effects") {
		requested[e["id"]], _ = at(e, "requested_at")
	}
	for _, ev := range rows(x, "effect_events") {
		if t, _ := at(ev, "at"); t.Before(requested[ev["effect_id"]]) {
			return fmt.Sprintf("effect_events: seq %v is before its effect was requested", ev["seq"])
		}
	}
	for _, c := range rows(x, "tool_calls") {
		m := msgs[c["message_id"]]
		if m == nil || imported[m["id"]] {
			continue
		}
		mt, _ := at(m, "created_at")
		if t, _ := at(c, "decided_at"); t.Before(mt) {
			return fmt.Sprintf("tool call %v is decided before its message", c["tool_call_id"])
		}
	}
	// Generations: an answer is a new assistant message under the prompt.
	for _, g := range rows(x, "generations") {
		if s, f := g["started_at"], g["finished_at"]; s != nil && f != nil {
			st, _ := at(g, "started_at")
			ft, _ := at(g, "finished_at")
			if ft.Before(st) {
				return fmt.Sprintf("generation %v finished before it started", g["id"])
			}
		}
		if g["state"] != "completed" {
			continue
		}
		answer := msgs[g["message_id"]]
		switch {
		case answer == nil:
			return fmt.Sprintf("generation %v: completed with no answer in the export", g["id"])
		case g["message_id"] == g["prompt_message_id"]:
			return fmt.Sprintf("generation %v: its answer is its own prompt", g["id"])
		case answer["parent_id"] != g["prompt_message_id"] || answer["role"] != "assistant":
			return fmt.Sprintf("generation %v: its answer %v is not an assistant message under its prompt", g["id"], g["message_id"])
		}
	}
	return ""
}

// rpEachTime calls parse for every time of the document (a key ending in
// _at, or at), and returns the first problem.
func rpEachTime(x map[string]any, parse func(what string, v any) (time.Time, string)) string {
	check := func(where string, r map[string]any) string {
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if len(k) > 3 && k[len(k)-3:] == "_at" || k == "at" {
				if _, p := parse(where+"."+k, r[k]); p != "" {
					return p
				}
			}
		}
		return ""
	}
	if p := check("conversation", x["conversation"].(map[string]any)); p != "" {
		return p
	}
	keys := make([]string, 0, len(x))
	for k, v := range x {
		if _, ok := v.([]any); ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		for i, r := range rows(x, key) {
			if p := check(fmt.Sprintf("%s[%d]", key, i), r); p != "" {
				return p
			}
		}
	}
	return ""
}

// sortBySeq orders rows by their seq.
func sortBySeq(rs []map[string]any) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, _ := strconv.ParseFloat(fmt.Sprint(rs[i]["seq"]), 64)
		b, _ := strconv.ParseFloat(fmt.Sprint(rs[j]["seq"]), 64)
		return a < b
	})
}

// rpDuration reads an ISO 8601 duration of hours, minutes and seconds
// (PT1H, PT20S), as an export spells a tool's deadline.
func rpDuration(s string) (time.Duration, bool) {
	m := rpDurationPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	var d time.Duration
	for i, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		if m[i+1] != "" {
			f, err := strconv.ParseFloat(m[i+1], 64)
			if err != nil {
				return 0, false
			}
			d += time.Duration(f * float64(unit))
		}
	}
	return d, true
}

var rpDurationPattern = regexp.MustCompile(`^PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?$`)
