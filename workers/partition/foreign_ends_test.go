package partition_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestLagGrowsWhileOwnerDead: one of two instances dies (kill -9) under
// traffic. Its leases stay live until their TTL, and nothing can tell it is
// dead sooner, yet describe must not show its partitions caught up with a
// frozen source end meanwhile: the survivor writes their source ends, so
// lag grows while lease_live is still true, and lease_live turns false when
// the dead owner's session expires.
//
// The server must show lag within 5 s of a 15 s TTL renewed every 5 s,
// well before the lease could expire (10 s at the soonest). Here the TTL is
// 6 s renewed every 0.5 s (expiry 5.5 s after the crash at the soonest),
// and ends go stale after 0.5 s (offsets every 0.3 s + checkpoints every
// 0.2 s) and are looked for every 0.15 s: lag must grow within 3 s, and
// grow again, while the dead owner still shows as live.
func TestLagGrowsWhileOwnerDead(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	const parts = 8
	env.CreateSourceTopics(parts, "busy")
	env.CreateMirror("m", "busy")
	startTraffic(t, env.Clusters.SourceAddr(), []string{"busy"}, parts)
	a, b := env.StartInstance("a"), env.StartInstance("b")
	describe := func() []service.PartitionRow {
		rows, err := env.Svc.ListPartitions(context.Background(), service.PartitionFilter{Mirror: "m"})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	workertest.WaitFor(t, 30*time.Second, "8 partitions MIRRORING, 4 on each instance, source ends known", func() (bool, string) {
		desc := fmt.Sprintf("a runs %d, b runs %d; ", len(a.Engine.Running()), len(b.Engine.Running()))
		if len(a.Engine.Running()) != parts/2 || len(b.Engine.Running()) != parts/2 {
			return false, desc
		}
		rows := describe()
		for _, r := range rows {
			if r.State != service.StateMirroring || r.SourceOffset == nil || !r.LeaseLive {
				return false, desc + fmt.Sprintf("busy/%d %s owner %s", r.Partition, r.State, r.Owner)
			}
		}
		return len(rows) == parts, desc
	})

	a.Crash()
	crashed := time.Now()
	atCrash := map[int32]int64{}
	for _, r := range describe() {
		if r.Owner == "a" {
			atCrash[r.Partition] = *r.SourceOffset
		}
	}
	if len(atCrash) != parts/2 {
		t.Fatalf("a owns %d partitions after its crash, want %d", len(atCrash), parts/2)
	}

	// Each dead-owned partition's source end must move past the one stored
	// at the crash, with lag, and then move again.
	first := map[int32]int64{}
	workertest.WaitFor(t, 3*time.Second, "the dead owner's partitions to show a growing source end and lag", func() (bool, string) {
		done := 0
		var desc string
		for _, r := range describe() {
			old, ok := atCrash[r.Partition]
			if !ok {
				continue
			}
			if r.Owner != "a" || !r.LeaseLive {
				t.Fatalf("busy/%d: owner %s, lease_live %v %s after a's crash: its lease cannot have expired yet",
					r.Partition, r.Owner, r.LeaseLive, time.Since(crashed))
			}
			src, lag := *r.SourceOffset, int64(0)
			if r.Lag != nil {
				lag = *r.Lag
			}
			desc += fmt.Sprintf("busy/%d source %d (at crash %d) lag %d; ", r.Partition, src, old, lag)
			if src <= old || lag <= 0 {
				continue
			}
			if f, seen := first[r.Partition]; !seen {
				first[r.Partition] = src
			} else if src > f {
				done++
			}
		}
		return done == len(atCrash), desc
	})
	t.Logf("lag grew twice on every dead-owned partition %s after the crash", time.Since(crashed).Round(time.Millisecond))

	// The session was renewed at most Renew before the crash: its leases
	// expire between TTL - Renew and TTL after it. From then on describe
	// shows them not live until b takes them over.
	workertest.WaitFor(t, workertest.TTL+10*time.Second, "the dead owner's leases to show as not live", func() (bool, string) {
		var desc string
		ok := true
		for _, r := range describe() {
			if _, mine := atCrash[r.Partition]; !mine {
				continue
			}
			desc += fmt.Sprintf("busy/%d owner %s live %v; ", r.Partition, r.Owner, r.LeaseLive)
			if (r.Owner == "a") == r.LeaseLive {
				ok = false
			}
		}
		return ok, desc
	})
	since := time.Since(crashed)
	if earliest := workertest.TTL - workertest.Renew - 250*time.Millisecond; since < earliest {
		t.Fatalf("the dead owner's leases showed as not live %s after its crash, before they could expire (%s)", since, earliest)
	}
	t.Logf("the dead owner's leases showed as not live %s after its crash (TTL %s)", since.Round(time.Millisecond), workertest.TTL)
}
