package partition_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// TestScenarioContinueByRecords: a destination that another tool filled
// with the start of the source's history (same keys, values, headers and
// timestamps, other offsets: the source has transactions), on a source with
// no __mirror_state to prove it by. Continue finds the destination's last
// record on the source, compares the records before it one by one, and
// copies only what follows: the destination ends as the source's committed
// records, each once. The dry run says so first, and a destination whose
// history differs from the source's just before its last record is refused.
func TestScenarioContinueByRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := newEngineEnv(t, devcluster.Config{})
	src, dst := env.Clusters.SourceAddr(), env.Clusters.DestinationAddr()
	for _, topic := range []string{"orders", "forged"} {
		if err := env.Clusters.Source.CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		workertest.ProduceRecords(t, workertest.Plain(src), seq(topic, 0, "a", 12)...)
		produceTransactionsEnding(t, src, topic, 1, []bool{true, false, true})
		workertest.ProduceRecords(t, workertest.Plain(src), seq(topic, 0, "a2", 8)...)
	}
	// The other tool copied the first 20 committed records of each.
	env.CreateDestinationTopics(1, "orders", "forged")
	for _, topic := range []string{"orders", "forged"} {
		copied := workertest.ReadAll(t, src, topic, 0, true)[:20]
		var out []*kgo.Record
		for i, r := range copied {
			c := &kgo.Record{Topic: topic, Partition: 0, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
			if topic == "forged" && i == 17 {
				c.Value = []byte("not the source's")
			}
			out = append(out, c)
		}
		workertest.ProduceRecords(t, workertest.Plain(dst), out...)
	}
	// Offsets differ: the source's 20th committed record is past a marker
	// and an aborted transaction.
	srcAll := workertest.ReadAll(t, src, "orders", 0, true)
	if srcAll[19].Offset == 19 {
		t.Fatalf("the source's 20th committed record is at offset 19: the test needs offsets that differ")
	}
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: src}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}

	preview, err := service.NewControl(service.Config{Pool: env.Pool, Catalog: service.KafkaCatalog(5 * time.Second),
		Destination: workertest.Plain(dst), SourceState: statetopic.ReadState})
	if err != nil {
		t.Fatal(err)
	}
	res, err := preview.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "orders|forged", Continue: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Continuation) != 2 || len(res.Continuation[1].Partitions) != 1 || len(res.Continuation[0].Partitions) != 1 {
		t.Fatalf("preview: %+v", res.Continuation)
	}
	forged, orders := res.Continuation[0].Partitions[0], res.Continuation[1].Partitions[0]
	last := srcAll[19].Offset
	if orders.Outcome != service.ContinueAfterOverlap || orders.Proof != service.ProofRecords ||
		orders.OverlapSourceOffset == nil || *orders.OverlapSourceOffset != last ||
		orders.OverlapDestinationOffset == nil || *orders.OverlapDestinationOffset != 19 ||
		orders.RecordsToCopy != srcAll[len(srcAll)-1].Offset-last {
		t.Errorf("orders preview: %+v, want continue by records from source offset %d", orders, last)
	}
	if forged.Outcome != service.ContinueRefused || !strings.Contains(forged.Detail, "cannot be proven to be the source's history") {
		t.Errorf("forged preview: %+v, want refused", forged)
	}

	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "orders|forged", Continue: true}); err != nil {
		t.Fatal(err)
	}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{SourceState: statetopic.ReadState})
	want := values(srcAll)
	workertest.WaitFor(t, 30*time.Second, "orders on the destination to be the source's committed records, each once", func() (bool, string) {
		got := values(workertest.ReadAll(t, dst, "orders", 0, true))
		return strings.Join(got, ",") == strings.Join(want, ","), fmt.Sprintf("%d records, want %d", len(got), len(want))
	})
	if _, msgs := env.stateEvents("m", "orders", 0); !strings.Contains(strings.Join(msgs, " | "), "compared one by one") {
		t.Errorf("orders/0's events do not say how the history was proven: %v", msgs)
	}
	// The compared records are in the offset map: the source's offset of
	// the 20th record translates to the destination's 19.
	if tr, err := env.Svc.Translate(ctx, "m", "orders", 0, last); err != nil || tr.DestinationOffset != 19 || !tr.Exact {
		t.Errorf("source offset %d translates to %+v (%v), want 19 exactly", last, tr, err)
	}
	row := env.waitPartition("m", "forged", 0, 30*time.Second, "FAILED, not retried", func(r repo.Partition) bool {
		return r.State == service.StateFailed && !r.Retryable
	})
	if !strings.Contains(row.Error, "cannot be proven to be the source's history") {
		t.Errorf("forged/0's error: %q", row.Error)
	}
	if got := workertest.ReadAll(t, dst, "forged", 0, true); len(got) != 20 {
		t.Errorf("forged on the destination has %d records, want the other tool's 20", len(got))
	}
}
