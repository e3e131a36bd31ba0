package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runbook runs the sh blocks of a Markdown document as the steps of a test.
// A block is named by an HTML comment just before it, <!-- step: NAME -->,
// and one that describes a feature still being built carries
// <!-- pending: FEATURE --> too: it is skipped, with a log line. Blocks run
// in the document's order, each with bash -e in a fresh shell, so an
// operator who pastes them in that order does what the test did.
type runbook struct {
	t      *testing.T
	path   string
	blocks []runbookBlock
	// next is the block that is to run next; visited counts each block's
	// runs and skips.
	next    int
	visited []int
	env     []string
	dir     string // the shells' working directory
	// diagnose, when set, says what a failed block's output may not: the
	// deployments' FAILED partitions and why.
	diagnose func() string
}

type runbookBlock struct {
	step    string
	pending string
	script  string
	line    int
}

var (
	runbookStep    = regexp.MustCompile(`^<!-- step: ([a-z0-9-]+) -->$`)
	runbookPending = regexp.MustCompile(`^<!-- pending: ([^>]+?) -->$`)
)

// loadRunbook reads the document's sh blocks. Every sh block must be named,
// and no name may be used twice.
func loadRunbook(t *testing.T, path string) *runbook {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &runbook{t: t, path: path, dir: t.TempDir()}
	var step, pending string
	var block *runbookBlock
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case block != nil && trimmed == "```":
			r.blocks = append(r.blocks, *block)
			block = nil
		case block != nil:
			block.script += line + "\n"
		case trimmed == "```sh":
			if step == "" {
				t.Errorf("%s:%d: a sh block with no <!-- step: NAME --> before it: the test would not run it", path, n)
			} else if first, dup := seen[step]; dup {
				t.Errorf("%s:%d: step %q is also the name of the block at line %d", path, n, step, first)
			}
			seen[step] = n
			block = &runbookBlock{step: step, pending: pending, line: n}
			step, pending = "", ""
		case runbookStep.MatchString(trimmed):
			step = runbookStep.FindStringSubmatch(trimmed)[1]
		case runbookPending.MatchString(trimmed):
			pending = runbookPending.FindStringSubmatch(trimmed)[1]
		case trimmed == "":
		default:
			// A comment names only the block right after it.
			step, pending = "", ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if block != nil {
		t.Fatalf("%s:%d: the sh block of step %s is never closed", path, block.line, block.step)
	}
	if len(r.blocks) == 0 {
		t.Fatalf("%s has no sh blocks", path)
	}
	r.visited = make([]int, len(r.blocks))
	return r
}

func (r *runbook) index(step string) int {
	for i, b := range r.blocks {
		if b.step == step {
			return i
		}
	}
	r.t.Fatalf("%s has no step %q", r.path, step)
	return -1
}

// take checks that step is the next block of the document and moves past
// it.
func (r *runbook) take(step string) runbookBlock {
	r.t.Helper()
	i := r.index(step)
	if i != r.next {
		r.t.Fatalf("the test runs step %s, but the next block of %s is %s (line %d): the document and the test disagree on the order",
			step, r.path, r.blocks[r.next].step, r.blocks[r.next].line)
	}
	r.next++
	r.visited[i]++
	return r.blocks[i]
}

// run runs the named block, which must be the next in the document, and
// returns its output, failing the test if it exits non-zero. A pending
// block is skipped: ran is false.
func (r *runbook) run(step string, env ...string) (out string, ran bool) {
	r.t.Helper()
	b := r.take(step)
	if b.pending != "" {
		r.t.Logf("runbook step %s (line %d) SKIPPED: it is marked pending until %s is built", step, b.line, b.pending)
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-c", b.script)
	cmd.Dir = r.dir
	cmd.Env = append(append([]string{}, r.env...), env...)
	start := time.Now()
	output, err := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	if ctx.Err() != nil {
		r.t.Fatalf("runbook step %s (line %d) did not end within 3m; output:\n%s", step, b.line, output)
	}
	if err != nil {
		more := ""
		if r.diagnose != nil {
			more = "\n" + r.diagnose()
		}
		r.t.Fatalf("runbook step %s (line %d) failed after %s: %v; output:\n%s%s", step, b.line, took, err, output, more)
	}
	r.t.Logf("runbook step %s (line %d, %s):\n%s", step, b.line, took, indent(string(output)))
	return string(output), true
}

// skip passes over the named block without running it, saying why; only
// for a block that needs a tool this machine lacks.
func (r *runbook) skip(step, why string) {
	r.t.Helper()
	b := r.take(step)
	r.t.Logf("runbook step %s (line %d) SKIPPED: %s", step, b.line, why)
}

// again goes back to the named block: the blocks from there run again, in
// the document's order.
func (r *runbook) again(step string) {
	r.t.Helper()
	i := r.index(step)
	if r.visited[i] == 0 {
		r.t.Fatalf("again(%s): that step has not run yet", step)
	}
	r.next = i
}

// finish checks that every block of the document was run (or skipped as
// pending) at least once.
func (r *runbook) finish() {
	r.t.Helper()
	for i, b := range r.blocks {
		if r.visited[i] == 0 {
			r.t.Errorf("runbook step %s (%s line %d) never ran", b.step, r.path, b.line)
		}
	}
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// runbookEnv is the shells' environment: this one's, less the KMIRROR_*
// settings a developer may have set (a server or a token of their own),
// with dir first on PATH and the given variables.
func runbookEnv(dir string, vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KMIRROR_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH")), vars...)
}

// buildKmirror builds the kmirror binary into dir: the runbook's commands
// run the real CLI.
func buildKmirror(dir string) error {
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "kmirror"), ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// errNoKcat: kcat is not installed here (CI installs it).
var errNoKcat = errors.New("kcat is not installed")

func kcatAvailable() error {
	if _, err := exec.LookPath("kcat"); err != nil {
		return errNoKcat
	}
	return nil
}

// runbookCurl finds a curl command in a line of shell.
var runbookCurl = regexp.MustCompile(`(^|[\s|;(])curl\s`)

// TestRunbookCurlsSendTheToken: every curl of the disaster-recovery
// runbook sends KMIRROR_TOKEN. A deployment beyond loopback checks tokens,
// and a wait loop on `curl -sf` that does not send it never ends: -f hides
// the 401. (TestDisasterRecoveryRunbook runs them against servers that
// check tokens.)
func TestRunbookCurlsSendTheToken(t *testing.T) {
	t.Parallel()
	rb := loadRunbook(t, filepath.Join("..", "..", "docs", "disaster-recovery.md"))
	curls := 0
	for _, b := range rb.blocks {
		for i, line := range strings.Split(b.script, "\n") {
			if !runbookCurl.MatchString(line) {
				continue
			}
			curls++
			if !strings.Contains(line, `-H "Authorization: Bearer $KMIRROR_TOKEN"`) {
				t.Errorf("%s:%d (step %s): curl without the token: %s", rb.path, b.line+1+i, b.step, strings.TrimSpace(line))
			}
		}
	}
	if curls == 0 {
		t.Fatalf("%s has no curl: the check checks nothing", rb.path)
	}
}
