package partition_test

import (
	"fmt"
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

// TestScenarioSlowDestinationKeepsOrder: while records stream in, the
// destination holds some produce requests for longer than the delivery
// timeout (1 s here), so batches queued behind them time out. Each such
// partition may go through FAILED and retry, but no record may land out of
// order: a later batch produced before the worker sees the failure, gone
// out at the offsets of the one that timed out, would make alignment fail
// the partition for good ("divergence"). At the end the destination holds
// exactly the source's records.
func TestScenarioSlowDestinationKeepsOrder(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("slow", 3, nil); err != nil {
		t.Fatal(err)
	}
	// A backlog to copy flat out, so that batches are produced all the
	// time, also while a failure is on its way to the worker.
	// Every value is its own, so that the record-by-record comparison at
	// the end tells a skipped or repeated copy from its neighbours (they
	// often share a timestamp).
	produceNumbered(t, env.Clusters.SourceAddr(), "slow", 3, 300_000, 100, kgo.SnappyCompression())

	// Every 10th produce request to the destination waits 1.5 s, for the
	// first eight such stalls.
	var produces, stalls atomic.Int64
	env.Clusters.Destination.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if produces.Add(1)%10 == 0 && stalls.Add(1) <= 8 {
			time.Sleep(1500 * time.Millisecond)
		}
		return nil, nil, false
	})
	env.CreateMirror("m", "slow")
	// A produce buffer smaller than a stall's worth of records, so that
	// fetched batches wait for room while their session's deadline passes.
	env.StartInstanceOpts("i1", workertest.InstanceOpts{ProduceBuffer: 5_000})
	workertest.WaitEndsEqual(t, env.Env, "slow", 3, 90*time.Second)
	env.WaitStates("m", service.StateMirroring, 30*time.Second)
	failed := 0
	for p := int32(0); p < 3; p++ {
		steps, msgs := env.stateEvents("m", "slow", p)
		for i, st := range steps {
			if strings.Contains(st, "→ FAILED") {
				failed++
			}
			if strings.Contains(msgs[i], "divergence") || strings.Contains(msgs[i], "foreign write") {
				t.Errorf("slow/%d: %s: %s", p, st, msgs[i])
			}
		}
	}
	t.Logf("%d stalls, %d FAILED transitions", stalls.Load(), failed)
}

// produceNumbered writes n records round-robin to a topic's partitions,
// each value its number padded to size bytes, with codec.
func produceNumbered(t *testing.T, addr, topic string, partitions, n, size int, codec kgo.CompressionCodec) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		value := fmt.Appendf(nil, "%-*d", size, i)
		cl.Produce(t.Context(), &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}
