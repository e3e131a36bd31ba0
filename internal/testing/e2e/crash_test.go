package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Crash-safety tests (docs/design.md, "The copy", exactly once): while a producer
// writes to the source continuously, `kmirror server` child processes are
// SIGKILLed at random moments and restarted. Once the producer stops and
// every partition has caught up, the destination must equal the source
// exactly, partition by partition: same records, same order, no gap, no
// duplicate.

const (
	crashTopic      = "orders"
	crashPartitions = 4
	// 2 records per partition every 20ms: 400 records/s.
	produceTick    = 20 * time.Millisecond
	producePerTick = 2
	catchUpTimeout = 60 * time.Second
)

// TestCrashSafetySingleInstance kills the only instance again and again; it
// restarts with the same instance id, so it must wait for its own dead
// leases to expire before taking them over at a new epoch.
func TestCrashSafetySingleInstance(t *testing.T) {
	t.Parallel()
	kills := killCount(t)
	w := newWorld(t, crashTopic, crashPartitions)
	prod := startProducer(t, w.clusters.SourceAddr(), crashTopic, crashPartitions, produceTick, producePerTick)

	start := time.Now()
	s, api := w.start("solo")
	w.createMirror(api)
	modes := map[string]int{}
	for i := range kills {
		mode := w.pickKillMode()
		modes[mode]++
		t.Logf("kill %d/%d: %s", i+1, kills, w.killAfter(s, mode))
		s, api = w.start("solo")
	}
	killPhase := time.Since(start)

	w.finish(prod, func() string { return api }, kills, modes, killPhase)
}

// TestCrashSafetyTwoInstances runs two instances and kills them one at a
// time, alternating; each restart takes a new instance id, so the survivor
// and the newcomer rebalance the leases while the dead one's expire. The
// source is written in transactions, a quarter of them aborted, so the
// mirror must copy only committed records across offset gaps (markers and
// aborted records) and still reach lag 0.
func TestCrashSafetyTwoInstances(t *testing.T) {
	t.Parallel()
	kills := killCount(t)
	w := newWorld(t, crashTopic, crashPartitions)
	prod := startProducerOpts(t, w.clusters.SourceAddr(), crashTopic, crashPartitions, produceTick, producePerTick, true)

	start := time.Now()
	names := []string{"a", "b"}
	lifetime := []int{0, 0}
	servers := make([]*serverProcess, 2)
	apis := make([]string, 2)
	for i := range servers {
		servers[i], apis[i] = w.start(fmt.Sprintf("%s-%d", names[i], lifetime[i]))
	}
	w.createMirror(apis[0])
	modes := map[string]int{}
	for k := range kills {
		i := k % 2
		mode := w.pickKillMode()
		modes[mode]++
		t.Logf("kill %d/%d: %s", k+1, kills, w.killAfter(servers[i], mode))
		servers[1-i].alive()
		lifetime[i]++
		servers[i], apis[i] = w.start(fmt.Sprintf("%s-%d", names[i], lifetime[i]))
	}
	killPhase := time.Since(start)

	w.finish(prod, func() string { return apis[0] }, kills, modes, killPhase)
	for _, s := range servers {
		s.alive()
	}
}

// killCount is how many SIGKILLs a test sends: 10, or KMIRROR_E2E_KILLS
// for a longer soak.
func killCount(t testing.TB) int {
	t.Helper()
	v := os.Getenv("KMIRROR_E2E_KILLS")
	if v == "" {
		return 10
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("KMIRROR_E2E_KILLS=%q: want a positive number", v)
	}
	return n
}

// finish stops the producer, waits for every partition to catch up, checks
// the copy and logs what the test did.
func (w *world) finish(prod *producer, api func() string, kills int, modes map[string]int, killPhase time.Duration) {
	t := w.t
	t.Helper()
	sent, err := prod.stop()
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	srcEnd := endOffsets(t, w.clusters.SourceAddr(), w.topic, true)
	caughtUp := time.Now()
	w.waitCaughtUp(api, srcEnd, catchUpTimeout)
	catchUp := time.Since(caughtUp)
	for _, r := range w.rows() {
		if r.lost != 0 {
			t.Errorf("partition %d reports %d lost record(s); retention removed nothing", r.partition, r.lost)
		}
	}
	compared := w.assertExactCopy()
	if int64(compared) != sent {
		t.Errorf("compared %d records, but the producer had %d acknowledged", compared, sent)
	}
	var failures []string
	for _, s := range w.servers {
		for _, f := range s.logs.partitionFailuresSince(w.failuresFrom) {
			failures = append(failures, s.id+": "+f)
		}
	}
	modeList := make([]string, 0, len(modes))
	for m, n := range modes {
		modeList = append(modeList, fmt.Sprintf("%s=%d", m, n))
	}
	slices.Sort(modeList)
	t.Logf("%d SIGKILLs (%s) over %d server lifetimes in %s; caught up %s after the producer stopped; "+
		"%d records compared across %d partitions (source end offsets %v): exact copy",
		kills, strings.Join(modeList, " "), w.lifetimes, killPhase.Round(time.Millisecond),
		catchUp.Round(time.Millisecond), compared, w.partitions, srcEnd)
	var exact, verified, verifiedRecords int
	var other []string
	for _, s := range w.servers {
		for _, reason := range s.logs.alignments() {
			var k int
			switch {
			case strings.HasPrefix(reason, "resuming at source offset"):
				exact++
			case strings.HasPrefix(reason, "verified "):
				if _, err := fmt.Sscanf(reason, "verified %d record(s)", &k); err == nil {
					verified++
					verifiedRecords += k
				} else {
					other = append(other, reason)
				}
			case strings.HasPrefix(reason, "new: "):
			default:
				other = append(other, reason)
			}
		}
	}
	t.Logf("alignments after takeovers: %d resumed exactly at the checkpoint, %d verified %d record(s) a killed "+
		"instance wrote past its checkpoint, %d other %q", exact, verified, verifiedRecords, len(other), other)
	// A takeover re-aligns and keeps the state: a crash is not a failure,
	// so nothing here may page whoever alerts on FAILED.
	if len(failures) > 0 {
		t.Errorf("%d partition failure(s) logged by the servers; an ownership change must not be one", len(failures))
		for i, f := range failures {
			if i == 15 {
				t.Logf("  … %d more", len(failures)-i)
				break
			}
			t.Logf("  %s", f)
		}
	}
}
