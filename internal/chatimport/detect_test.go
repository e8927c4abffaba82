package chatimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDetectTheFixtures: every conversation of the import fixtures is told
// its own format (a refusals fixture's malformed ones may be told none), and
// never another's.
func TestDetectTheFixtures(t *testing.T) {
	names, err := filepath.Glob("../../tests/testdata/imports/*.json")
	if err != nil || len(names) < 6 {
		t.Fatalf("the fixtures: %v %v", names, err)
	}
	for _, name := range names {
		format, _, _ := strings.Cut(filepath.Base(name), "-")
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = Each(bytes.NewReader(body), func(i int, c json.RawMessage) error {
			n++
			got := Detect(c)
			if got != format && !(got == "" && strings.Contains(name, "refusals")) {
				t.Errorf("%s[%d]: told %q, want %q", filepath.Base(name), i, got, format)
			}
			return nil
		})
		if err != nil || n == 0 {
			t.Fatalf("%s: %d conversations (%v)", name, n, err)
		}
	}
}

// TestDetectFile: the first conversation names the file's format, in an
// array, a "conversations" wrapper or alone; an empty file is ErrEmpty.
func TestDetectFile(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`[{"id": "a", "mapping": {}}]`, "chatgpt"},
		{`{"conversations": [{"id": "a", "mapping": {"n": {}}}]}`, "chatgpt"},
		{`[{"id": "r", "chat": {"history": {"messages": {}}}}]`, "openwebui"},
		{`{"id": "c", "history": {"messages": {}, "currentId": null}}`, "openwebui"},
		{`{"conversationId": "x", "messages": []}`, "librechat"},
		{`[{"messages": [{"messageId": "m", "parentMessageId": null}]}]`, "librechat"},
		{`{"format": "pgconvo.export", "version": 3, "conversation": {}}`, "pgconvo"},
		{`[{"id": "a", "mapping": null}]`, ""},
		{`{"messages": [{"id": "m", "parentId": null}]}`, ""},
		{`[]`, ""},
		{`[1, 2]`, ""},
	} {
		got, err := DetectFile(strings.NewReader(c.body))
		if err != nil || got != c.want {
			t.Errorf("%s: %q (%v), want %q", c.body, got, err, c.want)
		}
	}
	for _, body := range []string{"", " \n\t "} {
		if _, err := DetectFile(strings.NewReader(body)); !errors.Is(err, ErrEmpty) {
			t.Errorf("%q: %v, want ErrEmpty", body, err)
		}
	}
}
