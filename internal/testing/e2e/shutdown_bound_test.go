package e2e

import (
	"encoding/json"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"kmirror/internal/testing/testnet"
)

// shutdownBound is how long a server told to stop (SIGTERM) may take to be
// gone, whatever is down: docs/deployment.md's "within 4 s, and 1 s later
// if a step hangs".
const shutdownBound = 5 * time.Second

// TestSIGTERMWithinBoundOnABadDay: the binary, mirroring under traffic at
// the server's own lease and delivery timings, gets a SIGTERM while
// PostgreSQL hangs and the destination is gone. It is gone within 5 s of
// the signal, and the shutdown fits its budget without the backstop: no
// "did not finish within its grace period". Every step that took longer
// than its share is named in a "slow to stop" line.
func TestSIGTERMWithinBoundOnABadDay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, crashTopic, crashPartitions)
	u, err := url.Parse(w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := testnet.NewProxy(t, u.Host)
	u.Host = db.Addr()
	prod := startProducer(t, w.clusters.SourceAddr(), crashTopic, crashPartitions, produceTick, producePerTick)
	defer func() { _, _ = prod.stop() }()
	w.lifetimes++
	a := startServer(t, w.bin, w.logDir, w.lifetimes, "a", u.String(), w.clusters.DestinationAddr(),
		"--lease-ttl", "15s", "--lease-renew-interval", "5s", "--delivery-timeout", "4s")
	w.servers = append(w.servers, a)
	api := a.waitReady(20 * time.Second)
	w.createMirror(api)
	waitUntil(t, time.Minute, "every partition MIRRORING", func() bool {
		n := 0
		for _, r := range w.rows() {
			if r.state == "MIRRORING" {
				n++
			}
		}
		return n == crashPartitions
	})
	time.Sleep(time.Second) // copies in flight
	if err := w.clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	db.Cut(testnet.Hang)
	time.Sleep(500 * time.Millisecond) // the clients notice
	signalled := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM:\n%s", a.tail(40))
	}
	took := time.Since(signalled)
	slow := stopLines(a.tail(400))
	t.Logf("gone %s after SIGTERM (exit %d); steps over their share: %v", took.Round(time.Millisecond), a.cmd.ProcessState.ExitCode(), slow)
	if took > shutdownBound {
		t.Errorf("gone %s after SIGTERM, want within %s", took.Round(time.Millisecond), shutdownBound)
	}
	if strings.Contains(a.tail(400), "did not finish within its grace period") {
		t.Errorf("the backstop ended the shutdown:\n%s", a.tail(40))
	}
}

// stopLines returns the components that the log says were slow to stop,
// with how long they took.
func stopLines(log string) []string {
	var out []string
	for l := range strings.Lines(log) {
		var line struct {
			Msg       string        `json:"msg"`
			Component string        `json:"component"`
			Took      time.Duration `json:"took"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && strings.HasPrefix(line.Msg, "slow to stop") {
			out = append(out, line.Component+" "+line.Took.Round(time.Millisecond).String())
		}
	}
	return out
}

// TestSIGTERMWhileStartingWithinBound: a server that is still starting,
// its database hanging (a failover under way), gets a SIGTERM: it is gone
// within 5 s too.
func TestSIGTERMWhileStartingWithinBound(t *testing.T) {
	t.Parallel()
	w := newWorld(t, crashTopic, crashPartitions)
	u, err := url.Parse(w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := testnet.NewProxy(t, u.Host)
	u.Host = db.Addr()
	db.Cut(testnet.Hang)
	w.lifetimes++
	a := startServer(t, w.bin, w.logDir, w.lifetimes, "a", u.String(), w.clusters.DestinationAddr())
	w.servers = append(w.servers, a)
	time.Sleep(2 * time.Second) // starting, waiting on the database
	signalled := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM:\n%s", a.tail(40))
	}
	took := time.Since(signalled)
	t.Logf("gone %s after SIGTERM (exit %d):\n%s", took.Round(time.Millisecond), a.cmd.ProcessState.ExitCode(), a.tail(10))
	if took > shutdownBound {
		t.Errorf("gone %s after SIGTERM, want within %s", took.Round(time.Millisecond), shutdownBound)
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d: a stop while starting is no failure", code)
	}
}
