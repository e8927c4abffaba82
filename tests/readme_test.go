package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeRoles are the login roles the README's session creates (cluster
// wide, so the test refuses to run where they exist and drops them after).
var readmeRoles = []string{"web", "support", "dba"}

// readmeBlock is one ```sql block of README.md.
type readmeBlock struct {
	line int // README.md line of the block's first SQL line
	sql  []string
}

// notRunComment marks the ```sql block right after it as deliberately not
// run (an error shown on purpose, say), with its reason.
var notRunComment = regexp.MustCompile(`^<!-- not run: (\S.*\S) -->$`)

// readmeSQLBlocks returns the ```sql blocks of a README, in order, and the
// number marked <!-- not run: reason --> (the comment on the line before
// the fence, or before the blank lines before it).
func readmeSQLBlocks(text string) (run []readmeBlock, skipped int, err error) {
	lines := strings.Split(text, "\n")
	previous := "" // the last non-blank line before the current one
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "```") && strings.TrimSpace(line) != "```sql" && strings.TrimSpace(line) != "```" {
			// Another language's fence: skip to its end.
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			}
			previous = ""
			continue
		}
		if strings.TrimSpace(line) != "```sql" {
			if strings.HasPrefix(strings.TrimSpace(line), "<!-- not run") && !notRunComment.MatchString(strings.TrimSpace(line)) {
				return nil, 0, fmt.Errorf("README.md:%d: write <!-- not run: reason -->, with a reason", i+1)
			}
			if strings.TrimSpace(line) != "" {
				previous = strings.TrimSpace(line)
			}
			continue
		}
		b := readmeBlock{line: i + 2}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.sql = append(b.sql, lines[i])
		}
		if i == len(lines) {
			return nil, 0, fmt.Errorf("README.md:%d: a ```sql block that never ends", b.line-1)
		}
		if notRunComment.MatchString(previous) {
			skipped++
		} else {
			run = append(run, b)
		}
		previous = ""
	}
	return run, skipped, nil
}

// TestReadmeSQLBlocksAreFound: the extraction sees a fence, skips another
// language's, honours the not-run mark and refuses one without a reason.
func TestReadmeSQLBlocksAreFound(t *testing.T) {
	t.Parallel()
	text := "intro\n```sql\nSELECT 1;\n```\n```sh\necho ```sql\n```\n<!-- not run: shows CV005 -->\n\n```sql\nDELETE FROM x;\n```\n```sql\nSELECT 2;\nSELECT 3;\n```\n"
	run, skipped, err := readmeSQLBlocks(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(run) != 2 || skipped != 1 || run[0].line != 3 || run[1].line != 14 || strings.Join(run[1].sql, " ") != "SELECT 2; SELECT 3;" {
		t.Fatalf("got %d run %+v, %d skipped", len(run), run, skipped)
	}
	if _, _, err := readmeSQLBlocks("<!-- not run -->\n```sql\nSELECT 1;\n```\n"); err == nil {
		t.Fatal("a not-run mark without a reason must be refused")
	}
}

// TestReadme runs every ```sql block of README.md, in order, as one psql
// session (ON_ERROR_STOP=1) on a freshly migrated database, connected as the
// README says: DATABASE_URL, the superuser's URL, which the README's first
// block leaves for its application role.
func TestReadme(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, skipped, err := readmeSQLBlocks(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```sql block to run")
	}

	db := newDB(t)
	if !queryRow[bool](t, db, `SELECT session_user = 'postgres' AND rolsuper FROM pg_roles WHERE rolname = session_user`) {
		t.Fatal("the README's session returns to postgres, the local server's superuser; this server's superuser is another role")
	}
	for _, role := range readmeRoles {
		if queryRow[bool](t, db, `SELECT count(*) > 0 FROM pg_roles WHERE rolname = $1`, role) {
			t.Fatalf("role %s exists on this server already; the README's session creates it", role)
		}
	}
	t.Cleanup(func() {
		// psql has exited, but its last backend may still be ending (and
		// dropping web's temporary table): wait for it, then drop the roles.
		ctx := context.Background()
		for i := 0; i < 100 && queryRow[bool](t, db, `SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = ANY ($1)`, readmeRoles); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		for _, role := range readmeRoles {
			if _, err := db.Exec(ctx, `DROP ROLE IF EXISTS `+role); err != nil {
				t.Errorf("dropping role %s: %v", role, err)
			}
		}
	})

	// One script, each block behind a comment naming its README line; lines
	// maps the script's line numbers back to README.md's.
	var script strings.Builder
	var lines []int // lines[i] is the README line of script line i+1
	for _, b := range blocks {
		script.WriteString(fmt.Sprintf("-- README.md:%d\n", b.line))
		lines = append(lines, b.line-1)
		for j, l := range b.sql {
			script.WriteString(l + "\n")
			lines = append(lines, b.line+j)
		}
	}
	path := filepath.Join(t.TempDir(), "readme.sql")
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dbURL := db.Config().ConnString()
	cmd := exec.Command(psqlPath(t), "-X", "-v", "ON_ERROR_STOP=1", "-d", dbURL, "-f", path)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	out, err := cmd.CombinedOutput()
	where := regexp.MustCompile(`psql:` + regexp.QuoteMeta(path) + `:(\d+):`)
	shown := where.ReplaceAllStringFunc(string(out), func(m string) string {
		n, _ := strconv.Atoi(where.FindStringSubmatch(m)[1])
		if n >= 1 && n <= len(lines) {
			return fmt.Sprintf("README.md:%d:", lines[n-1])
		}
		return m
	})
	if err != nil {
		t.Fatalf("README.md's sql blocks stopped (%v); psql said:\n%s", err, shown)
	}
	if strings.Contains(shown, "ERROR") || strings.Contains(shown, "warning") {
		t.Fatalf("README.md's sql blocks ran with errors or warnings:\n%s", shown)
	}
	t.Logf("README.md: ran %d sql blocks in order, skipped %d marked not run", len(blocks), skipped)

	// Where the session ends: the purchase conversation erased by dba, its
	// re-run confirmed and pending, the receipt applied, and nine
	// conversations ("A conversation in psql", the purchase, the rendered
	// request's, the live-updates one, the two imported, Security's, the
	// exported one, LibreChat's).
	requireCount(t, db, 9, `SELECT count(*) FROM convo.conversations`)
}
