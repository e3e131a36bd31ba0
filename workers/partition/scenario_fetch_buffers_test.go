package partition_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioBatchCopyHoldsItsFetchBuffers: a batch copied whole is sent
// from the fetch response's own bytes, which are lent from a pool
// (kafkawire.BufferPool) and given back once nothing needs them. Here the
// destination holds some produce requests back, so that batches wait in
// the producer's queue while later responses are read into buffers given
// back before. Tests overwrite a buffer when it is given back
// (kafkawire.PoisonReleased), so a batch whose buffer went back before it
// was answered reaches the destination as garbage: the broker refuses it
// and the partition fails, or it lands and the comparison fails. Neither
// may happen.
func TestScenarioBatchCopyHoldsItsFetchBuffers(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("held", 3, nil); err != nil {
		t.Fatal(err)
	}
	// 30 MB uncompressed, so that responses are large enough to be lent
	// (over 64 KiB) and each value is its own.
	produceNumbered(t, env.Clusters.SourceAddr(), "held", 3, 30_000, 1000, kgo.NoCompression())
	// Every 4th produce request waits 300 ms, well within the delivery
	// timeout: nothing should fail.
	var produces atomic.Int64
	env.Clusters.Destination.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		env.Clusters.Destination.KeepControl()
		if produces.Add(1)%4 == 0 {
			time.Sleep(300 * time.Millisecond)
		}
		return nil, nil, false
	})
	env.CreateMirror("m", "held")
	env.StartInstanceOpts("i1", workertest.InstanceOpts{CopyBatches: true, DeliveryTimeout: 10 * time.Second})
	workertest.WaitEndsEqual(t, env.Env, "held", 3, 90*time.Second)
	env.WaitStates("m", service.StateMirroring, 30*time.Second)
	for p := int32(0); p < 3; p++ {
		steps, msgs := env.stateEvents("m", "held", p)
		for i, st := range steps {
			if strings.Contains(st, "→ FAILED") {
				t.Errorf("held/%d: %s: %s", p, st, msgs[i])
			}
		}
	}
	t.Logf("%d produce requests", produces.Load())
}
