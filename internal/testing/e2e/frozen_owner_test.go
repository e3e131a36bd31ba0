package e2e

import (
	"syscall"
	"testing"
	"time"
)

// TestFrozenOwnerWritesNothingAfterWaking: server a is frozen (SIGSTOP)
// under traffic for longer than its lease and the outage grace, so b takes
// every partition; then a is woken (SIGCONT). Everything a had in flight
// or buffered when it froze must not reach the destination after b took
// over: a finds its leases gone and its writes fenced. The destination is
// an exact copy and no partition FAILED (issue 45, item 6).
func TestFrozenOwnerWritesNothingAfterWaking(t *testing.T) {
	t.Parallel()
	w := newWorld(t, crashTopic, crashPartitions)
	prod := startProducer(t, w.clusters.SourceAddr(), crashTopic, crashPartitions, produceTick, producePerTick)
	const grace = 3 * time.Second
	w.args = []string{"--lease-outage-grace", grace.String()}
	a, apiA := w.start("a")
	w.createMirror(apiA)
	_, apiB := w.start("b")
	owners := w.mirroringOwners
	waitUntil(t, time.Minute, "a and b mirroring two partitions each", func() bool {
		o := owners()
		return o["a"] == crashPartitions/2 && o["b"] == crashPartitions/2
	})

	frozen := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "b mirroring every partition while a is frozen", func() bool {
		return owners()["b"] == crashPartitions
	})
	tookOver := time.Since(frozen)
	// Frozen a while longer, with b copying what a had buffered.
	time.Sleep(2 * time.Second) // the freeze itself, on purpose
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woken := time.Now()
	w.noPermanentFailure()
	waitUntil(t, time.Minute, "a back, and a and b sharing again", func() bool {
		o := owners()
		return o["a"] == crashPartitions/2 && o["b"] == crashPartitions/2
	})
	t.Logf("b took every partition %s after a froze; a woke %s after the freeze and shares again %s later",
		tookOver.Round(time.Millisecond), woken.Sub(frozen).Round(time.Millisecond), time.Since(woken).Round(time.Millisecond))
	w.finish(prod, func() string { return apiB }, 0, map[string]int{}, time.Since(frozen))
}
