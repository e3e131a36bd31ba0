package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/testing/testnet"
)

// forgeHeartbeats writes heartbeats for key on the destination every 50 ms
// until the returned function is called, which says how many it wrote:
// the highest session, unsigned; a session signed with a made-up MAC; and
// the last real heartbeat of key, replayed.
func forgeHeartbeats(t *testing.T, destination, key string) func() int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(destination), kgo.DefaultProduceTopic("__mirror_heartbeats"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			"__mirror_heartbeats": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		defer close(done)
		n := 0
		var real []byte
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 50*time.Millisecond)
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				if string(r.Key) == key && bytes.Contains(r.Value, []byte(`"mac"`)) && !bytes.Contains(r.Value, []byte(`"AAAA"`)) {
					real = r.Value
				}
			})
			pcancel()
			forged := [][]byte{
				[]byte(`{"session": 9223372036854775807}`),
				[]byte(`{"session": 9223372036854775807, "beat": 9223372036854775807, "key": 1, "mac": "AAAA"}`),
			}
			if real != nil {
				forged = append(forged, real)
			}
			for _, v := range forged {
				if cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: v, Partition: 0}).FirstErr() == nil {
					n++
				}
			}
		}
		done <- n
	}()
	return func() int {
		cancel()
		n := <-done
		cl.Close()
		return n
	}
}

// TestCutOffInstanceStopsBeforeTakeover: server a loses its database (the
// network to it drops everything: a proxy in front of PostgreSQL hangs)
// while b still reaches it, under traffic. a rides through: its heartbeats
// to the destination keep its leases trusted, and it goes on copying past
// the point where its session expires, while b leaves its partitions
// alone. Once the outage grace has passed, b takes them. By then a must
// have stopped writing: it gives each lease up, which its log shows before
// b's log shows the same partition taken, and the destination holds every
// record exactly once. When a's database comes back, a joins again and the
// two share. This is the guard against a split brain (issue 29).
func TestCutOffInstanceStopsBeforeTakeover(t *testing.T) {
	t.Parallel()
	cutOff(t, cutOffOpts{})
}

// TestCutOffInstanceWithForgedHeartbeats is the same with a client that
// can write the destination's heartbeat topic but holds no key, writing
// for a, from before the cut to the end: a session higher than any (which
// hid a's real heartbeats from b: b took a's partitions while a copied,
// 657 duplicates, issue 45), an unsigned one, and a's own last heartbeat
// again and again. b ignores and counts them, and the copy stays exact.
func TestCutOffInstanceWithForgedHeartbeats(t *testing.T) {
	t.Parallel()
	cutOff(t, cutOffOpts{forge: true})
}

// TestCutOffInstanceRidesThroughAfterDestinationRebuilt is the same after
// the destination came back empty (its heartbeat topic gone): in the soak
// of issue 45 instances that lived through that never had a heartbeat
// acknowledged again, and the next database outage dropped their leases
// within 5-10 s instead of riding through.
func TestCutOffInstanceRidesThroughAfterDestinationRebuilt(t *testing.T) {
	t.Parallel()
	cutOff(t, cutOffOpts{rebuildFirst: true})
}

type cutOffOpts struct {
	// forge writes forged heartbeats for the cut-off instance.
	forge bool
	// rebuildFirst brings the destination back empty before the cut, and
	// waits for the copy to heal.
	rebuildFirst bool
}

func cutOff(t *testing.T, opts cutOffOpts) {
	w := newWorld(t, crashTopic, crashPartitions)
	u, err := url.Parse(w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testnet.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	prod := startProducer(t, w.clusters.SourceAddr(), crashTopic, crashPartitions, produceTick, producePerTick)

	const grace = 4 * time.Second
	w.args = []string{"--lease-outage-grace", grace.String()}
	w.lifetimes++
	a := startServer(t, w.bin, w.logDir, w.lifetimes, "a", u.String(), w.clusters.DestinationAddr(), w.args...)
	w.servers = append(w.servers, a)
	apiA := a.waitReady(20 * time.Second)
	w.createMirror(apiA)
	_, apiB := w.start("b")
	owners := w.mirroringOwners
	waitUntil(t, time.Minute, "a and b mirroring two partitions each", func() bool {
		o := owners()
		return o["a"] == crashPartitions/2 && o["b"] == crashPartitions/2
	})
	ofA := map[int32]bool{}
	for _, r := range w.rows() {
		if r.owner == "a" {
			ofA[r.partition] = true
		}
	}

	if opts.rebuildFirst {
		if err := w.clusters.Down("destination"); err != nil {
			t.Fatal(err)
		}
		if err := w.clusters.UpEmpty("destination"); err != nil {
			t.Fatal(err)
		}
		rebuilt := time.Now()
		healed := func() bool {
			ends, err := listEnds(w.clusters.DestinationAddr(), crashTopic, false)
			if err != nil || len(ends) < crashPartitions {
				return false
			}
			for _, e := range ends {
				if e == 0 {
					return false
				}
			}
			o := owners()
			return o["a"] == crashPartitions/2 && o["b"] == crashPartitions/2
		}
		waitUntil(t, time.Minute, "the copy healed on the rebuilt destination", healed)
		waitUntil(t, 20*time.Second, "a's heartbeats acknowledged again", func() bool {
			return len(logTimesAny(t, a.path, "heartbeats acknowledged again")) > 0
		})
		t.Logf("the copy healed and a's heartbeats were acknowledged %s after the destination came back empty",
			time.Since(rebuilt).Round(time.Millisecond))
		// What must log no partition failure is the ride-through that
		// follows. While the copy heals, a first copy to the empty
		// cluster can go unanswered past the servers' 1 s delivery
		// timeout on a loaded machine: its partition fails once, says
		// so, and retries (seen in CI, on both orders/2 and orders/3).
		w.failuresFrom = time.Now()
	}
	if opts.forge {
		var deployment string
		if err := w.pool.QueryRow(t.Context(), `SELECT id::text FROM deployment`).Scan(&deployment); err != nil {
			t.Fatal(err)
		}
		stop := forgeHeartbeats(t, w.clusters.DestinationAddr(), deployment+"/a")
		defer func() {
			if n := stop(); n == 0 {
				t.Error("no heartbeat was forged")
			}
			for _, reason := range []string{"malformed", "bad_mac"} {
				name := `kmirror_heartbeats_rejected_total{reason="` + reason + `"}`
				if v := metricValue(t, apiB, name); v == "" || v == "0" {
					t.Errorf("b's %s is %q, want the forged heartbeats counted", name, v)
				}
			}
		}()
	}

	cut := time.Now()
	proxy.Cut(testnet.Hang)
	// Past a's session's expiry (TTL), a still owns its partitions and
	// they still advance: a is copying without its database.
	ends := func() map[int32]int64 {
		e, _ := listEnds(w.clusters.DestinationAddr(), crashTopic, false)
		return e
	}
	time.Sleep(time.Until(cut.Add(leaseTTL + time.Second))) // past the expiry, on purpose
	before := ends()
	waitUntil(t, grace, "a's partitions copied after its session expired", func() bool {
		now := ends()
		for p := range ofA {
			if now[p] <= before[p] {
				return false
			}
		}
		return true
	})
	for _, r := range w.rows() {
		if ofA[r.partition] && r.owner != "a" {
			t.Fatalf("partition %d was taken by %q %s after a lost its database, within the grace of %s", r.partition, r.owner, time.Since(cut).Round(time.Millisecond), grace)
		}
	}
	rodeUntil := time.Since(cut)
	waitUntil(t, 30*time.Second, "b mirroring every partition", func() bool {
		return owners()["b"] == crashPartitions
	})
	tookOver := time.Since(cut)
	if tookOver < grace {
		t.Errorf("b took a's partitions %s after the cut, within the grace of %s", tookOver.Round(time.Millisecond), grace)
	}

	// Each of a's partitions: a gave it up before b took it.
	lost := logTimes(t, a.path, "lease lost", "a")
	taken := logTimes(t, w.servers[len(w.servers)-1].path, "lease acquired", "b")
	for p := range ofA {
		l, ok := lost[p]
		if !ok {
			t.Fatalf("b took partition %d while a had not given its lease up (no lease lost in a's log): a split brain", p)
		}
		tk, ok := taken[p]
		if !ok {
			t.Fatalf("b's log has no lease acquired for partition %d", p)
		}
		if !l.Before(tk) {
			t.Errorf("partition %d: a gave its lease up at %s, after b took it at %s", p, l.Format(time.RFC3339Nano), tk.Format(time.RFC3339Nano))
		}
		t.Logf("partition %d: a stopped %s after the cut, b took it %s after a stopped", p, l.Sub(cut).Round(time.Millisecond), tk.Sub(l).Round(time.Millisecond))
	}

	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, "a back, and a and b sharing again", func() bool {
		o := owners()
		return o["a"] == crashPartitions/2 && o["b"] == crashPartitions/2
	})
	t.Logf("a copied without its database at least until %s after the cut; b mirrored every partition %s after it", rodeUntil.Round(time.Millisecond), tookOver.Round(time.Millisecond))
	w.finish(prod, func() string { return apiB }, 0, map[string]int{}, time.Since(cut))
}

// logTimesAny returns the times msg was logged in a server's JSON log.
func logTimesAny(t *testing.T, path, msg string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, line := range bytes.Split(b, []byte("\n")) {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == msg {
			out = append(out, rec.Time)
		}
	}
	return out
}

// logTimes reads a server's JSON log and returns, per partition of the
// crash topic, the last time msg was logged by instance for a partition
// lease.
func logTimes(t *testing.T, path, msg, instance string) map[int32]time.Time {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int32]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Time      time.Time `json:"time"`
			Msg       string    `json:"msg"`
			Instance  string    `json:"instance"`
			Kind      string    `json:"kind"`
			Topic     string    `json:"topic"`
			Partition *int32    `json:"partition"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Msg != msg || rec.Kind != "partition" ||
			rec.Instance != instance || rec.Topic != crashTopic || rec.Partition == nil {
			continue
		}
		out[*rec.Partition] = rec.Time
	}
	if err := sc.Err(); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	return out
}
