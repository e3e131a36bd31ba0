package partition_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devcluster"
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

	// The next produce request waits 6 s in the destination, on its own
	// connection (kgo produces on a dedicated one), while the destination
	// answers everything else: alignment's offset reads included.
	var armed atomic.Bool
	armed.Store(true)
	release := make(chan struct{})
	env.Clusters.Destination.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		env.Clusters.Destination.KeepControl()
		if armed.CompareAndSwap(true, false) {
			time.AfterFunc(6*time.Second, func() { close(release) })
			env.Clusters.Destination.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	produce("b", 50)
	// Paused while those copies are held: the session ends with them in
	// flight (it waits 3 s, then gives up on them), and is resumed at once.
	workertest.WaitFor(t, 10*time.Second, "the copies to be held", func() (bool, string) { return !armed.Load(), "" })
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
