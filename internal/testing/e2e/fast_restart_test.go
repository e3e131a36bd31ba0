package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestFastRestartDoesNotSlowTakeover: three servers at the server's own
// lease timings (TTL 15 s) share six partitions under traffic. One is
// killed (SIGKILL) and started again 8 s later, before its old session
// expired, under a new id as the default one (host and pid) is. Every
// partition it held is copying again within the takeover bound of a plain
// crash, TTL + 5 s (docs/deployment.md), not later because the others
// leave its share to a newcomer that waits (the soak: 26-27 s against
// 13-17 s).
func TestFastRestartDoesNotSlowTakeover(t *testing.T) {
	t.Parallel()
	const (
		partitions = 6
		ttl        = 15 * time.Second
		bound      = ttl + 5*time.Second
	)
	w := newWorld(t, crashTopic, partitions)
	prod := startProducer(t, w.clusters.SourceAddr(), crashTopic, partitions, produceTick, producePerTick)
	defer func() { _, _ = prod.stop() }()
	w.args = []string{"--lease-ttl", ttl.String(), "--lease-renew-interval", "5s", "--delivery-timeout", "4s"}
	servers := map[string]*serverProcess{}
	var api string
	for _, id := range []string{"a", "b", "c"} {
		s, base := w.start(id)
		servers[id] = s
		if id == "a" {
			api = base
			w.createMirror(api)
		}
	}
	owners := func() map[string][]int32 {
		o := map[string][]int32{}
		for _, r := range w.rows() {
			if r.state == "MIRRORING" {
				o[r.owner] = append(o[r.owner], r.partition)
			}
		}
		return o
	}
	waitUntil(t, 2*time.Minute, "two partitions each, MIRRORING", func() bool {
		o := owners()
		return len(o["a"]) == 2 && len(o["b"]) == 2 && len(o["c"]) == 2
	})
	ofC := owners()["c"]
	time.Sleep(time.Second) // copies in flight
	servers["c"].kill()
	killed := time.Now()
	before := map[int32]int64{}
	for _, r := range w.rows() {
		if r.dstNext != nil {
			before[r.partition] = *r.dstNext
		}
	}
	// Restarted before its old session expired: quickly, but after the
	// others' passes since the kill.
	time.Sleep(8 * time.Second)
	w.start("c2")
	// Copying again: the checkpoint moved past where it was at the kill,
	// under an owner that holds the lease now.
	var took time.Duration
	waitUntil(t, 2*bound, "c's partitions copying again", func() bool {
		rows := w.rows()
		for _, p := range ofC {
			r := rows[p]
			if r.state != "MIRRORING" || r.dstNext == nil || *r.dstNext <= before[p] {
				return false
			}
		}
		took = time.Since(killed)
		return true
	})
	o := owners()
	var desc []string
	for id, ps := range o {
		desc = append(desc, fmt.Sprintf("%s=%v", id, ps))
	}
	sort.Strings(desc)
	t.Logf("c's partitions %v copying again %s after the kill and restart; owners now %v", ofC, took.Round(100*time.Millisecond), desc)
	if took > bound {
		t.Errorf("c's partitions copying again %s after the kill, want within %s", took.Round(100*time.Millisecond), bound)
	}
	// Then the shares even out: the restarted instance holds two.
	waitUntil(t, time.Minute, "two partitions each again, the restarted one included", func() bool {
		o := owners()
		return len(o["a"]) == 2 && len(o["b"]) == 2 && len(o["c2"]) == 2
	})
	t.Logf("shares even again %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	w.noPermanentFailure()
}
