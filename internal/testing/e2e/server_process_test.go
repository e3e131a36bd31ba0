package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Lease timings of the child servers. kgo's shortest delivery timeout is 1s
// and it must stay below the lease margin (TTL/3), so the TTL is a little
// over 3s.
const (
	leaseTTL        = 3500 * time.Millisecond
	leaseRenew      = 500 * time.Millisecond
	deliveryTimeout = time.Second
)

// serverProcess is one lifetime of a `kmirror server` child process.
type serverProcess struct {
	t    testing.TB
	id   string
	cmd  *exec.Cmd
	logs *serverLog
	path string // log file

	exited chan struct{}
	killed atomic.Bool
}

// startServer runs `kmirror server` with the given instance id, and args
// after its own flags (a flag given again there wins). Its output goes to a
// file in logDir, which the test keeps when it fails.
func startServer(t testing.TB, bin, logDir string, seq int, id, dbURL, destination string, args ...string) *serverProcess {
	t.Helper()
	return startServerEnv(t, bin, logDir, seq, id, dbURL, destination, nil, args...)
}

// startServerEnv is startServer with env added to the child's environment.
func startServerEnv(t testing.TB, bin, logDir string, seq int, id, dbURL, destination string, env []string, args ...string) *serverProcess {
	t.Helper()
	path := filepath.Join(logDir, fmt.Sprintf("%02d-%s.log", seq, id))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &serverProcess{t: t, id: id, path: path, exited: make(chan struct{}),
		logs: newServerLog(f)}
	s.cmd = exec.Command(bin, "server",
		"--listen", "127.0.0.1:0",
		"--database-url", dbURL,
		"--destination-bootstrap", destination,
		"--instance-id", id,
		"--lease-ttl", leaseTTL.String(),
		"--lease-renew-interval", leaseRenew.String(),
		"--delivery-timeout", deliveryTimeout.String(),
		"--log-level", "info")
	s.cmd.Args = append(s.cmd.Args, args...)
	s.cmd.Env = append(childEnv(), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	// Strict JSON log pipelines reject a key given twice in one line.
	t.Cleanup(func() {
		if lines, dupes := s.logs.jsonLinesAndDuplicates(); len(dupes) > 0 {
			t.Errorf("server %s: %d of %d JSON log lines repeat a key, e.g. %s", id, len(dupes), lines, dupes[0])
		}
	})
	if err := s.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start kmirror server %s: %v", id, err)
	}
	go func() {
		_ = s.cmd.Wait()
		f.Close()
		close(s.exited)
	}()
	t.Cleanup(s.kill)
	return s
}

// childEnv is the test's environment without KMIRROR_* variables, so only
// the flags configure the child.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KMIRROR_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitReady waits until the server logs that its API serves and returns
// the API's base URL.
func (s *serverProcess) waitReady(timeout time.Duration) string {
	s.t.Helper()
	select {
	case <-s.logs.ready:
		return "http://" + s.logs.listenAddr()
	case <-s.exited:
		s.t.Fatalf("kmirror server %s exited before serving:\n%s", s.id, s.tail(40))
	case <-time.After(timeout):
		s.t.Fatalf("kmirror server %s did not serve within %s:\n%s", s.id, timeout, s.tail(40))
	}
	return ""
}

// waitEvent waits for one of the server's milestones (see serverLog).
func (s *serverProcess) waitEvent(what string, ch <-chan struct{}, timeout time.Duration, describe func() string) {
	s.t.Helper()
	select {
	case <-ch:
	case <-s.exited:
		s.t.Fatalf("kmirror server %s exited while waiting for %s:\n%s", s.id, what, s.tail(40))
	case <-time.After(timeout):
		s.t.Fatalf("kmirror server %s: no %s within %s; partitions: %s\n%s", s.id, what, timeout, describe(), s.tail(40))
	}
}

// alive fails the test when the server exited without being killed.
func (s *serverProcess) alive() {
	s.t.Helper()
	select {
	case <-s.exited:
		if !s.killed.Load() {
			s.t.Fatalf("kmirror server %s exited on its own (%v):\n%s", s.id, s.cmd.ProcessState, s.tail(40))
		}
	default:
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *serverProcess) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.killed.Store(true)
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.t.Errorf("kmirror server %s (pid %d) still running 10s after SIGKILL", s.id, s.cmd.Process.Pid)
	}
}

// tail returns the last n lines of the server's log.
func (s *serverProcess) tail(n int) string {
	b, err := os.ReadFile(s.path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// serverLog writes a child's output to its file and watches the JSON log
// lines for milestones: serving, first partition lease, first partition
// reaching MIRRORING. It counts partition failures for the test log.
type serverLog struct {
	f *os.File

	mu       sync.Mutex
	partial  []byte
	addr     string
	failures []string
	failedAt []time.Time // when each of failures was logged
	// aligned are the reasons given for entering MIRRORING, which say how
	// alignment found the point to resume from.
	aligned []string

	// jsonLines counts the JSON log lines; dupes are those that give a
	// key more than once.
	jsonLines int
	dupes     []string

	// msgs counts the lines of each message.
	msgs map[string]int

	ready, leased, mirroring chan struct{}
	readyOnce, leasedOnce    sync.Once
	mirroringOnce            sync.Once
}

func newServerLog(f *os.File) *serverLog {
	return &serverLog{f: f, msgs: map[string]int{},
		ready: make(chan struct{}), leased: make(chan struct{}), mirroring: make(chan struct{})}
}

// Write is called by one goroutine at a time (exec copies stdout and
// stderr through the same writer).
func (l *serverLog) Write(p []byte) (int, error) {
	if _, err := l.f.Write(p); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *serverLog) line(b []byte) {
	var rec struct {
		Time   time.Time `json:"time"`
		Msg    string    `json:"msg"`
		Listen string    `json:"listen"`
		Kind   string    `json:"kind"`
		To     string    `json:"to"`
		Err    string    `json:"err"`
		Reason string    `json:"reason"`
		State  string    `json:"state"`
		Topic  string    `json:"topic"`
		Part   *int      `json:"partition"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return
	}
	l.jsonLines++
	l.msgs[rec.Msg]++
	if keys := duplicateKeys(b); len(keys) > 0 {
		l.dupes = append(l.dupes, fmt.Sprintf("%v in %s", keys, b))
	}
	switch rec.Msg {
	case "kmirror server started":
		l.addr = rec.Listen
		l.readyOnce.Do(func() { close(l.ready) })
	case "lease acquired":
		if rec.Kind == "partition" {
			l.leasedOnce.Do(func() { close(l.leased) })
		}
	case "partition state", "partition re-aligned":
		// A takeover re-aligns and keeps MIRRORING: as good as entering it.
		if rec.To == "MIRRORING" || rec.State == "MIRRORING" {
			l.aligned = append(l.aligned, rec.Reason)
			l.mirroringOnce.Do(func() { close(l.mirroring) })
		}
	case "partition failed":
		p := -1
		if rec.Part != nil {
			p = *rec.Part
		}
		l.failures = append(l.failures, fmt.Sprintf("%s/%d: %s", rec.Topic, p, rec.Err))
		l.failedAt = append(l.failedAt, rec.Time)
	}
}

func (l *serverLog) listenAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}

// count is how many lines had the message msg.
func (l *serverLog) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs[msg]
}

// jsonLinesAndDuplicates returns how many JSON log lines were seen and the
// ones that repeat a key.
func (l *serverLog) jsonLinesAndDuplicates() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.jsonLines, append([]string(nil), l.dupes...)
}

// duplicateKeys returns the keys that one JSON object (at any depth) of
// line gives more than once; encoding/json keeps the last silently.
func duplicateKeys(line []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(line))
	var dupes []string
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := k.(string)
				if seen[key] {
					dupes = append(dupes, key)
				}
				seen[key] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token() // '}'
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token() // ']'
			return err
		}
		return nil
	}
	if walk() != nil {
		return nil
	}
	return dupes
}

// partitionFailures returns the "partition failed" errors logged so far.
func (l *serverLog) partitionFailures() []string {
	return l.partitionFailuresSince(time.Time{})
}

// partitionFailuresSince returns the partition failures logged at or
// after since.
func (l *serverLog) partitionFailuresSince(since time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, f := range l.failures {
		if !l.failedAt[i].Before(since) {
			out = append(out, f)
		}
	}
	return out
}

// alignments returns the reasons logged on entering MIRRORING.
func (l *serverLog) alignments() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.aligned...)
}

// apiCall sends a JSON request to a server's REST API and decodes the
// answer into out (when not nil); any status but want is an error.
func apiCall(ctx context.Context, base, method, path string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
