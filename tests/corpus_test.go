package tests

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// Some tests read files of other projects in place, where the project keeps
// them beside a clone of this repository (../shared from the repository
// root): real chat exports and the official JSON-Schema-Test-Suite, each with
// its own licence. They are never copied into the repository, so a clone on
// its own does not have them: a test that reads one calls requireCorpus
// first, which skips the test with one line saying what is missing and why,
// or fails it with the same line when CI is set (a CI run is expected to
// have every corpus in place, and must not pass by skipping). The import
// tests that stand alone read the project's own fixtures instead
// (testdata/imports).

// corpus is a directory of other projects' files the tests read in place.
type corpus struct {
	path string // from tests/, where the tests run
	what string // what it holds and why it is not in the repository
}

var (
	chatImportsCorpus = corpus{"../../shared/samples/chat-imports",
		"other projects' sample exports, read in place, never copied here"}
	chatExportsCorpus = corpus{"../../shared/samples/chat-exports",
		"other projects' sample exports, read in place, never copied here"}
	jsonSchemaSuiteCorpus = corpus{"../../shared/jsonschema-suite",
		"the official JSON-Schema-Test-Suite, read in place, never copied here"}
)

// sampleCorpora are the corpora readSamples reads: both folders of real
// chat exports.
var sampleCorpora = []corpus{chatImportsCorpus, chatExportsCorpus}

// ciEnv names the variable that, when set (to anything but "", "0" or
// "false"), turns a missing corpus or tool from a skip into a failure.
const ciEnv = "CI"

// inCI reports whether ciEnv is set: a CI run must have every corpus and
// tool in place, and must not pass by skipping.
func inCI() bool {
	v := os.Getenv(ciEnv)
	return v != "" && v != "0" && v != "false"
}

// requireCorpus skips the test, with one line, unless every corpus is in
// place; with CI set it fails the test with that line instead. A corpus
// that is there but cannot be read fails the test either way.
func requireCorpus(t testing.TB, corpora ...corpus) {
	t.Helper()
	for _, c := range corpora {
		_, err := os.Stat(c.path)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, fs.ErrNotExist):
			t.Fatalf("reading %s: %v", c.shown(), err)
		case inCI():
			t.Fatal("failing (" + ciEnv + " is set): " + c.missing())
		default:
			t.Skip("skipping: " + c.missing())
		}
	}
}

// missing is the one line that says the corpus is missing, and why.
func (c corpus) missing() string {
	return c.shown() + " is not beside this clone (" + c.what + ")"
}

// shown is the corpus's path from the repository root, as a reader of the
// line would look for it.
func (c corpus) shown() string { return strings.TrimPrefix(c.path, "../") }

// jsonSchemaSuiteRoot is the directory that holds the suite's cases/: the
// one PGCONVO_JSONSCHEMA_SUITE names (which must be there: it was asked
// for), else the shared copy, required as a corpus.
func jsonSchemaSuiteRoot(t testing.TB) string {
	t.Helper()
	if root := os.Getenv(jsonSchemaSuiteEnv); root != "" {
		return root
	}
	requireCorpus(t, jsonSchemaSuiteCorpus)
	return jsonSchemaSuiteCorpus.path
}
