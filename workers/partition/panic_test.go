package partition_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/vocabulary/states"
	"kmirror/service"
	"kmirror/workers/partition"
	"kmirror/workers/workertest"
)

// TestWorkerPanicStaysLocal: a panic in one partition's worker fails that
// partition, with the panic in its error (and the stack in the log); the
// other partitions keep mirroring, and the failed one recovers by itself
// through the usual retry.
func TestWorkerPanicStaysLocal(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	for _, topic := range []string{"boom", "calm"} {
		if err := env.Clusters.Source.CreateTopic(topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		workertest.Produce(t, env.Clusters.SourceAddr(), topic, 2, 10, kgo.NoCompression())
	}
	env.CreateMirror("m", "boom|calm")
	var panicked atomic.Bool
	env.StartInstanceOpts("i1", workertest.InstanceOpts{EngineSignals: func(s *partition.EngineTestSignals) {
		s.BeforeStep.Hook(func(p partition.StepPoint) {
			if p.Key.Topic == "boom" && p.Key.Partition == 1 && p.State == states.Mirroring && panicked.CompareAndSwap(false, true) {
				panic("injected fault")
			}
		})
	}})
	// The test's retry backoff is short: the FAILED step shows in the
	// events even when the row is already back.
	workertest.WaitFor(t, 20*time.Second, "boom/1 FAILED by the panic", func() (bool, string) {
		_, msgs := env.stateEvents("m", "boom", 1)
		for _, m := range msgs {
			if strings.Contains(m, "→ FAILED: panic in partition worker: injected fault") {
				return true, ""
			}
		}
		return false, strings.Join(msgs, "; ")
	})
	// The others never left MIRRORING; the failed one comes back.
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	for _, topic := range []string{"boom", "calm"} {
		workertest.WaitMirrored(t, env.Env, topic, 2, 20*time.Second)
	}
	for _, p := range []struct {
		topic string
		part  int32
	}{{"boom", 0}, {"calm", 0}, {"calm", 1}} {
		steps, msgs := env.stateEvents("m", p.topic, p.part)
		for i, st := range steps {
			if strings.Contains(st, "FAILED") {
				t.Errorf("%s/%d: %s", p.topic, p.part, msgs[i])
			}
		}
	}
}
