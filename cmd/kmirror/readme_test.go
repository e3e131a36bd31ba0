package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/syncbuf"
	"kmirror/internal/testing/testdb"
)

// TestREADMECommands runs the README's shell examples against `kmirror dev`
// and compares what each command prints with the answer the README
// documents for it (the "#  " lines after it; readme_match_test.go says how
// they are compared and what is normalised: timestamps, ids, offsets, lag,
// durations). A command must exit 0, and one with no documented answer must
// not be answered with a problem (urn:kmirror:problem:...).
//
// The sh blocks run in the README's order in one bash, as a reader pastes
// them into one terminal after starting `kmirror dev` (so API and K carry
// over from block to block). Then every section (## heading) after the
// first that runs, runs again on its own in a fresh bash against a fresh
// `kmirror dev`, as a reader who jumps to it does. Before the commands run,
// the test waits for the demo mirror's partitions to be MIRRORING, which the
// README says they are within a second or two.
//
// What the test changes so that the commands run here:
//
//   - ./kmirror is the binary, built once before any block: `go build -o
//     kmirror ./cmd/kmirror` is not run, and `go run ./cmd/kmirror` becomes
//     ./kmirror (`kmirror` alone finds it on PATH).
//   - Each `kmirror dev` listens on ports of the kernel's choosing, so the
//     test can run beside others: 127.0.0.1:8080 (or localhost:8080),
//     127.0.0.1:19092 and 127.0.0.1:29092 in the commands become its API,
//     source and destination, and the other way round in the output.
//     KMIRROR_SERVER names its API for the CLI lines that rely on the
//     default server.
//   - A command that streams (curl -N, the event stream) is stopped after
//     2 s, as a reader presses Ctrl-C; the timeout's exit status 124 is
//     success.
//   - bash runs with pipefail, so `curl ... | jq` fails when curl does.
//
// What is not run, and why (readmeSections, readmeSkippedCommands):
//
//   - "Run it": starts `kmirror dev`, which the test starts itself.
//   - "Test it": runs the tests, this one among them.
//   - "Against your own clusters": needs Kafka clusters of your own.
//   - "__mirror_state and restore": needs an empty database and a
//     destination named by placeholders, and starts servers; restore is
//     tested by TestRestoreCommand and docs/disaster-recovery.md's runbook.
//   - "Docker": needs Docker (TestDeployFiles and .ci/run check the files).
//   - "Kubernetes": needs a Kubernetes cluster and Helm (.ci/helmcheck).
//   - "Secrets at rest": writes /etc/kmirror and starts servers of its own
//     (TestSecretsRotateAndStartupCheck covers rotation).
//   - `kmirror server ...` in "Running a server": a server of its own on a
//     placeholder database; kmirror dev is the server here.
//   - npm and npx lines ("Reading the event stream"): need Node.js and the
//     npm registry; TestTypeScriptSDK builds and runs the client.
//   - A line that pipes into jq, when jq is not installed (CI installs it).
//
// It needs bash, curl and timeout (coreutils), and skips without them.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kmirror dev several times")
	}
	for _, tool := range []string{"bash", "curl", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (CI installs it)", tool)
		}
	}
	blocks := loadREADME(t, "../../README.md")
	checkREADMESections(t, blocks)
	if t.Failed() {
		return
	}
	dir := t.TempDir()
	if err := buildKmirror(dir); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "secret.key")
	key, err := secretbox.NewKeyText()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	first := ""
	t.Run("in order", func(t *testing.T) {
		r := newREADMERun(t, dir, keyFile)
		for _, b := range blocks {
			if r.block(b) && first == "" {
				first = b.section
			}
		}
		r.summary()
	})
	// Each section after the first that runs, on its own. The first ran
	// on a fresh kmirror dev above.
	var alone []string
	for _, b := range blocks {
		if b.section != first && readmeRuns(b) && (len(alone) == 0 || alone[len(alone)-1] != b.section) {
			alone = append(alone, b.section)
		}
	}
	for _, section := range alone {
		t.Run("alone/"+section, func(t *testing.T) {
			r := newREADMERun(t, dir, keyFile)
			for _, b := range blocks {
				if b.section == section {
					r.block(b)
				}
			}
			r.summary()
		})
	}
}

// readmeSections says, for each heading with sh blocks under it, whether
// they run: "" when they do, else why not.
var readmeSections = map[string]string{
	"Run it":                              "it starts kmirror dev, which the test starts itself",
	"Test it":                             "it runs the tests, this one among them",
	"Against your own clusters":           "it needs Kafka clusters of your own",
	"Walk-through with curl":              "",
	"Reading the event stream":            "",
	"Pause, resume, failover and restart": "",
	"Metadata sync":                       "",
	"Fan-in: several sources into one destination": "",
	"Schema Registry: schemas follow the data":     "",
	"`__mirror_state` and restore":                 "it needs an empty database and a destination of its own, and starts servers (TestRestoreCommand covers restore)",
	"The CLI":                                      "",
	"Mirrors as code":                              "",
	"Running a server":                             "",
	"Docker":                                       "it needs Docker (TestDeployFiles and .ci/run check the files)",
	"Kubernetes":                                   "it needs a Kubernetes cluster and Helm (.ci/helmcheck renders the chart)",
	"API tokens and roles":                         "",
	"Secrets at rest":                              "it writes /etc/kmirror and starts servers of its own (TestSecretsRotateAndStartupCheck covers rotation)",
}

// readmeSkippedCommands are commands not run within sections that run,
// by how they start.
var readmeSkippedCommands = []struct{ prefix, why string }{
	{"go run ./cmd/kmirror dev", "the test started kmirror dev"},
	{"go build -o kmirror ./cmd/kmirror", "the test built ./kmirror once, before any block"},
	{"kmirror server ", "a server of its own on a placeholder database: kmirror dev is the server here"},
	{"npm ", "it needs Node.js and the npm registry (TestTypeScriptSDK builds and runs the client)"},
	{"npx ", "it needs Node.js and the npm registry (TestTypeScriptSDK builds and runs the client)"},
}

// checkREADMESections fails for a heading with sh blocks that
// readmeSections does not know, and for an entry no block is under, so
// the table follows the README.
func checkREADMESections(t *testing.T, blocks []readmeBlock) {
	t.Helper()
	seen := map[string]bool{}
	for _, b := range blocks {
		if _, ok := readmeSections[b.heading]; !ok {
			t.Errorf("README.md:%d: a sh block under %q, which readmeSections does not know: say there whether its commands run here", b.line, b.heading)
		}
		seen[b.heading] = true
	}
	for h := range readmeSections {
		if !seen[h] {
			t.Errorf("readmeSections names %q, but README.md has no sh block under that heading", h)
		}
	}
}

func readmeCommandSkip(text string) string {
	for _, s := range readmeSkippedCommands {
		if strings.HasPrefix(text, s.prefix) {
			return s.why
		}
	}
	if strings.Contains(text, "| jq") {
		if _, err := exec.LookPath("jq"); err != nil {
			return "jq is not installed (CI installs it)"
		}
	}
	return ""
}

// readmeRuns says whether any command of b runs.
func readmeRuns(b readmeBlock) bool {
	if readmeSections[b.heading] != "" {
		return false
	}
	for _, c := range b.commands {
		if readmeCommandSkip(c.text) == "" {
			return true
		}
	}
	return false
}

// readmeRun is one bash against one kmirror dev.
type readmeRun struct {
	t                      *testing.T
	dev                    readmeDev
	sh                     *readmeShell
	ran, compared, skipped int
	started                time.Time
}

func newREADMERun(t *testing.T, dir, keyFile string) *readmeRun {
	start := time.Now()
	dev := startREADMEDev(t, dir, keyFile)
	t.Logf("kmirror dev ready in %s: API %s, source %s, destination %s", time.Since(start).Round(time.Millisecond), dev.api, dev.source, dev.destination)
	sh := startREADMEShell(t, dir, runbookEnv(dir, "KMIRROR_SERVER=http://"+dev.api))
	return &readmeRun{t: t, dev: dev, sh: sh, started: time.Now()}
}

func (r *readmeRun) summary() {
	r.t.Logf("%d command(s) run, %d documented answer(s) compared, %d command(s) skipped, in %s",
		r.ran, r.compared, r.skipped, time.Since(r.started).Round(time.Millisecond))
}

// block runs b's commands, or says why not; it returns whether any ran.
func (r *readmeRun) block(b readmeBlock) bool {
	if why := readmeSections[b.heading]; why != "" {
		r.t.Logf("README.md:%d (%s) SKIPPED: %s", b.line, b.heading, why)
		r.skipped += len(b.commands)
		return false
	}
	ran := false
	for _, c := range b.commands {
		if r.command(c) {
			ran = true
		}
	}
	return ran
}

// readmeStream is a curl that keeps the connection open (-N).
var readmeStream = regexp.MustCompile(`^curl( [^|;&]*)? -[a-zA-Z]*N[a-zA-Z]*( |$)`)

// command runs c and checks what it printed; it returns whether it ran.
func (r *readmeRun) command(c readmeCommand) bool {
	t := r.t
	t.Helper()
	if why := readmeCommandSkip(c.text); why != "" {
		t.Logf("README.md:%d SKIPPED `%s`: %s", c.line, firstLine(c.text), why)
		r.skipped++
		return false
	}
	text := r.dev.rewriteCommand(c.text)
	stream := readmeStream.MatchString(text)
	if stream {
		text = "timeout -s INT 2 " + text
	}
	start := time.Now()
	out, code, err := r.sh.run(text, 2*time.Minute)
	took := time.Since(start).Round(time.Millisecond)
	out = r.dev.rewriteOutput(out)
	r.ran++
	if err != nil {
		t.Fatalf("README.md:%d `%s`: %v; output so far:\n%s", c.line, c.text, err, indent(out))
	}
	t.Logf("README.md:%d `%s` (%s, exit %d):\n%s", c.line, firstLine(c.text), took, code, indent(truncateLines(out, 30)))
	if code != 0 && !(stream && code == 124) {
		t.Errorf("README.md:%d `%s` exited %d; output:\n%s", c.line, c.text, code, indent(out))
		return true
	}
	if c.doc == nil {
		if strings.Contains(out, `"type":"urn:kmirror:problem:`) {
			t.Errorf("README.md:%d `%s` was answered with a problem, and the README documents no answer for it:\n%s", c.line, c.text, indent(out))
		}
		return true
	}
	r.compared++
	diff, err := compareREADMEAnswer(c.doc, out, stream)
	if err != nil {
		t.Errorf("README.md:%d: %v", c.docLine, err)
	} else if diff != "" {
		t.Errorf("README.md:%d `%s`: the answer documented at README.md:%d does not match the output\n(- documented, + output, after normalisation):\n%s",
			c.line, c.text, c.docLine, diff)
	}
	return true
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func truncateLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... (%d more lines)", len(lines)-n)
}

// readmeDev is a `kmirror dev` the test started, on ports of its own.
type readmeDev struct {
	api, source, destination string // host:port
	// sourceRegistry and destinationRegistry are the Schema Registries'
	// host:port.
	sourceRegistry, destinationRegistry string
}

// The README's addresses, kmirror dev's defaults.
const (
	readmeAPI         = "127.0.0.1:8080"
	readmeSource      = "127.0.0.1:19092"
	readmeDestination = "127.0.0.1:29092"
	// The Schema Registries'.
	readmeSourceRegistry      = "127.0.0.1:18081"
	readmeDestinationRegistry = "127.0.0.1:28081"
)

func (d readmeDev) rewriteCommand(s string) string {
	return strings.NewReplacer(
		readmeAPI, d.api, "localhost:8080", d.api,
		readmeSource, d.source, "localhost:19092", d.source,
		readmeDestination, d.destination, "localhost:29092", d.destination,
		readmeSourceRegistry, d.sourceRegistry, "localhost:18081", d.sourceRegistry,
		readmeDestinationRegistry, d.destinationRegistry, "localhost:28081", d.destinationRegistry,
		"go run ./cmd/kmirror ", "./kmirror ",
	).Replace(s)
}

func (d readmeDev) rewriteOutput(s string) string {
	return strings.NewReplacer(d.api, readmeAPI, d.source, readmeSource, d.destination, readmeDestination,
		d.sourceRegistry, readmeSourceRegistry, d.destinationRegistry, readmeDestinationRegistry).Replace(s)
}

var readmeBanner = regexp.MustCompile(`^\s*(Web console|Source Kafka|Destination|Source registry|Destination registry)\s+(?:http://)?(127\.0\.0\.1:\d+)`)

// startREADMEDev starts the built kmirror dev on a fresh database and
// ports of the kernel's choosing, and waits for the demo mirror's
// partitions to be MIRRORING. It is stopped with SIGINT (Ctrl-C) when the
// test ends.
func startREADMEDev(t *testing.T, dir, keyFile string) readmeDev {
	t.Helper()
	dbURL := testdb.New(t)
	cmd := exec.Command(filepath.Join(dir, "kmirror"), "dev", "--listen", "127.0.0.1:0", "--source-port", "0", "--destination-port", "0",
		"--source-registry-port", "0", "--destination-registry-port", "0")
	cmd.Dir = dir
	// The key file keeps dev from keeping a key in the user's cache
	// directory, as it does for a database named by KMIRROR_DATABASE_URL.
	cmd.Env = runbookEnv(dir, "KMIRROR_DATABASE_URL="+dbURL, "KMIRROR_SECRET_KEY_FILE="+keyFile)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 8)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := readmeBanner.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- [2]string{m[1], m[2]}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Errorf("kmirror dev did not stop within 15s of SIGINT")
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var d readmeDev
	timeout := time.After(2 * time.Minute)
	for d.api == "" || d.source == "" || d.destination == "" || d.sourceRegistry == "" || d.destinationRegistry == "" {
		select {
		case a := <-addrs:
			switch a[0] {
			case "Web console":
				d.api = a[1]
			case "Source Kafka":
				d.source = a[1]
			case "Destination":
				d.destination = a[1]
			case "Source registry":
				d.sourceRegistry = a[1]
			case "Destination registry":
				d.destinationRegistry = a[1]
			}
		case err := <-exited:
			t.Fatalf("kmirror dev exited before it was ready: %v\n%s", err, stderr.String())
		case <-timeout:
			t.Fatalf("kmirror dev was not ready within 2m\n%s", stderr.String())
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		states, err := readmeDemoStates("http://" + d.api)
		mirroring := 0
		for _, s := range states {
			if s == "MIRRORING" {
				mirroring++
			}
		}
		if err == nil && len(states) == 5 && mirroring == 5 {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo mirror's partitions were not all MIRRORING within 1m: %v %v\n%s", states, err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readmeDemoStates(base string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/partitions?mirror=demo", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var page struct {
		Partitions []struct {
			State string `json:"state"`
		} `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, err
	}
	var states []string
	for _, p := range page.Partitions {
		states = append(states, p.State)
	}
	return states, nil
}

// readmeShell is one bash that commands are pasted into, one at a time:
// variables set by one are there for the next.
type readmeShell struct {
	stdin  io.WriteCloser
	lines  chan string
	marker string
}

func startREADMEShell(t *testing.T, dir string, env []string) *readmeShell {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, pw, pw
	// Its own process group, so that what a command started goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	s := &readmeShell{stdin: stdin, lines: make(chan string, 4096),
		marker: fmt.Sprintf("__readme_command_done_%d__", time.Now().UnixNano())}
	go func() {
		defer close(s.lines)
		br := bufio.NewReader(pr)
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				s.lines <- strings.TrimSuffix(l, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		pr.Close()
	})
	if _, err := io.WriteString(stdin, "set -o pipefail\n"); err != nil {
		t.Fatal(err)
	}
	return s
}

// run pastes text and returns what it printed (stdout and stderr) and its
// exit status.
func (s *readmeShell) run(text string, limit time.Duration) (string, int, error) {
	// Standard input is not the script's: a command that reads it gets
	// nothing. The newline before the marker ends an output that has none.
	if _, err := fmt.Fprintf(s.stdin, "{\n%s\n} </dev/null 2>&1\nprintf '\\n%s %%d\\n' \"$?\"\n", text, s.marker); err != nil {
		return "", -1, err
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var out strings.Builder
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return out.String(), -1, errors.New("bash exited")
			}
			if rest, found := strings.CutPrefix(l, s.marker+" "); found {
				code, err := strconv.Atoi(rest)
				return out.String(), code, err
			}
			out.WriteString(l + "\n")
		case <-timer.C:
			return out.String(), -1, fmt.Errorf("it did not end within %s", limit)
		}
	}
}
