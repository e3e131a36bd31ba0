package partition_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioStalledProduceOutlivesSession: the destination holds one
// produce request far longer than a session waits for its records when it
// ends (the delivery timeout plus 2 s), and the topic is paused meanwhile,
// so the session ends with records in flight. kgo cannot cancel them (the
// idempotent producer waits for their outcome), and they land when the
// destination answers. If the next session read the destination's end and
// copied before they landed, its copies would land after them: the same
// source records twice, which alignment can only call a divergence. So an
// alignment first waits until kgo has reported on every record of the
// partition's earlier sessions. At the end the destination holds exactly
// the source's records, and no step was a divergence or a foreign write.
func TestScenarioStalledProduceOutlivesSession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("stall", 1, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "stall")
	env.StartInstance("i1") // delivery timeout 1 s, first retry within 100 ms
	produce := func(prefix string, n int) {
		t.Helper()
		workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("stall", 0, prefix, n)...)
	}
	produce("a", 100)
	workertest.WaitEndsEqual(t, env.Env, "stall", 1, 30*time.Second)

	waitHeld := holdNextProduce(env, 6*time.Second)
	produce("b", 50)
	// Paused while those copies are held: the session ends with them in
	// flight (it waits 3 s, then gives up on them), and is resumed at once.
	waitHeld(t)
	if _, err := env.Svc.PauseTopics(ctx, "m", "stall"); err != nil {
		t.Fatal(err)
	}
	env.waitPartition("m", "stall", 0, 10*time.Second, "the session to end", func(p repo.Partition) bool {
		return p.State != service.StateMirroring
	})
	if _, err := env.Svc.ResumeTopics(ctx, "m", "stall"); err != nil {
		t.Fatal(err)
	}
	produce("c", 50)

	workertest.WaitEndsEqual(t, env.Env, "stall", 1, 60*time.Second)
	env.WaitStates("m", service.StateMirroring, 30*time.Second)
	steps, msgs := env.stateEvents("m", "stall", 0)
	for i, st := range steps {
		if strings.Contains(msgs[i], "divergence") || strings.Contains(msgs[i], "foreign write") {
			t.Errorf("stall/0: %s: %s", st, msgs[i])
		}
	}
	t.Logf("steps: %v", steps)
}

// TestScenarioStalledProduceOutlivesHandover: as above, but the partition
// moves to another instance while its copies are held: a second instance
// starts and the first hands one of its two partitions back. The lease goes
// back only once those copies are answered (while it is still renewed), so
// the new owner's alignment sees them on the destination, rather than
// copying the same records again beside them.
func TestScenarioStalledProduceOutlivesHandover(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("handover", 2, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "handover")
	env.StartInstance("i1")
	produce := func(prefix string, n int) {
		t.Helper()
		for p := range int32(2) {
			workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("handover", p, prefix, n)...)
		}
	}
	produce("a", 100)
	workertest.WaitEndsEqual(t, env.Env, "handover", 2, 30*time.Second)

	// i1's next produce request holds both partitions' copies; i2's
	// producer, on a connection of its own, is answered.
	waitHeld := holdNextProduce(env, 6*time.Second)
	produce("b", 50)
	waitHeld(t)
	env.StartInstance("i2") // the fair share is now one partition each
	workertest.WaitFor(t, 30*time.Second, "a partition to move to i2", func() (bool, string) {
		owners := map[string]int{}
		for _, p := range env.Partitions("m") {
			if p.State == service.StateMirroring {
				owners[p.LeaseOwner]++
			}
		}
		return owners["i1"] == 1 && owners["i2"] == 1, fmt.Sprint(owners)
	})
	produce("c", 50)

	workertest.WaitEndsEqual(t, env.Env, "handover", 2, 60*time.Second)
	for p := range int32(2) {
		steps, msgs := env.stateEvents("m", "handover", p)
		for i, st := range steps {
			if strings.Contains(msgs[i], "divergence") || strings.Contains(msgs[i], "foreign write") {
				t.Errorf("handover/%d: %s: %s", p, st, msgs[i])
			}
		}
	}
}

// holdNextProduce makes the destination hold the next produce request for
// d on its connection (kgo produces on a dedicated one) while it answers
// every other connection, alignment's offset reads included. The returned
// function waits until a request is being held.
func holdNextProduce(env *engineEnv, d time.Duration) func(testing.TB) {
	var armed atomic.Bool
	armed.Store(true)
	release := make(chan struct{})
	dst := env.Clusters.Destination
	dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if armed.CompareAndSwap(true, false) {
			time.AfterFunc(d, func() { close(release) })
			dst.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	return func(t testing.TB) {
		workertest.WaitFor(t, 10*time.Second, "a produce request to be held", func() (bool, string) { return !armed.Load(), "" })
	}
}
