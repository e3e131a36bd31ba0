package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestMirrorsWait: --wait on each topic action, against a full server with
// workers, prints a progress line per topic and returns once every
// partition is in the action's target state.
func TestMirrorsWait(t *testing.T) {
	base, clusters := startInProcess(t, slog.New(slog.DiscardHandler))
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append([]string{"mirrors", "--server", base}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := cli("--create", "--mirror", "m", "--source-bootstrap", clusters.SourceAddr()); code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	for _, step := range []struct{ action, target string }{
		{"add", "MIRRORING"}, {"pause", "PAUSED"}, {"resume", "MIRRORING"}, {"remove", "STOPPED"},
	} {
		code, out, errOut := cli("--"+step.action, "--mirror", "m", "--topic", "bench", "--wait", "60s")
		if code != 0 {
			t.Fatalf("%s --wait: exit %d, stdout %q, stderr %q", step.action, code, out, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[len(lines)-1], "All partitions are "+step.target+" (after ") ||
			lines[len(lines)-2] != fmt.Sprintf("bench: 3/3 partitions %s", step.target) {
			t.Fatalf("%s --wait: stdout\n%s", step.action, out)
		}
		t.Logf("%s --wait:\n%s", step.action, out)
	}
}

// TestMirrorsWaitRunsOut: with no worker to move the partitions, --wait
// prints where they are, then gives up with exit status 3; the add is done.
func TestMirrorsWaitRunsOut(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror m1.\n", "--create", "--mirror", "m1", "--source-bootstrap", e.source)
	code, out, errOut := e.mirrors(t, "--add", "--mirror", "m1", "--topic", "my-topic|other-topic", "--wait", "1200ms")
	want := "Added 2 topic(s) to mirror m1: [my-topic, other-topic]\n" +
		"my-topic: 0/3 partitions MIRRORING\nother-topic: 0/1 partitions MIRRORING\n"
	if code != 3 || out != want ||
		!strings.Contains(errOut, "not every partition was MIRRORING after 1.2s (my-topic 0/3, other-topic 0/1); the add itself is done") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3 and stdout %q", code, out, errOut, want)
	}
	e.mustMirrors(t, "Paused mirroring for 1 topic(s): [my-topic]\n", "--pause", "--mirror", "m1", "--topic", "my-topic")
}

// TestMirrorsRemoveWaitPastFailed: a removed FAILED partition goes on to
// STOPPED by itself, so --remove --wait prints the FAILED count but waits
// on, and succeeds once the partition is STOPPED (here set as a worker
// would, as soon as the CLI has printed the FAILED line).
func TestMirrorsRemoveWaitPastFailed(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror m1.\n", "--create", "--mirror", "m1", "--source-bootstrap", e.source)
	e.mustMirrors(t, "Added 1 topic(s) to mirror m1: [other-topic]\n", "--add", "--mirror", "m1", "--topic", "other-topic")
	setState := func(state string) error {
		_, err := e.pool.Exec(context.Background(), `UPDATE mirror_partitions SET state = $1 WHERE mirror = 'm1'`, state)
		return err
	}
	if err := setState("FAILED"); err != nil {
		t.Fatal(err)
	}
	out := &onLine{match: "other-topic: 0/1 partitions STOPPED, 1 FAILED\n", then: func() {
		if err := setState("STOPPED"); err != nil {
			t.Error(err)
		}
	}}
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"mirrors", "--server", e.server, "--remove", "--mirror", "m1", "--topic", "other-topic", "--wait", "30s"}, out, &errOut)
	got := out.buf.String()
	if code != 0 || !strings.HasPrefix(got, "Removed 1 topic(s) from mirror m1: [other-topic]\n"+out.match+"other-topic: 1/1 partitions STOPPED\nAll partitions are STOPPED (after ") {
		t.Fatalf("--remove --wait on a FAILED partition: exit %d, stdout %q, stderr %q", code, got, errOut.String())
	}
}

// onLine is a stdout that calls then once, after match was written.
type onLine struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	match string
	then  func()
	done  bool
}

func (w *onLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.match) {
		w.done = true
		w.then()
	}
	return n, err
}
