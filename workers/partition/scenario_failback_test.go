package partition_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// TestScenarioFailback is a planned switchover and failback on
// stock Kafka. Deployment ab mirrors cluster A into B (with committed and
// aborted transactions, so offsets differ between them) and publishes its
// state to B's __mirror_state; the topic is failed over (removed) and B
// takes writes. Deployment ba, its own database, mirrors B back into A with
// continue: each partition proves that A holds B's history from the offset
// map in B's __mirror_state, compares the last records, and copies only
// B's new records. A then holds its old records followed by exactly B's
// new ones, none twice, and a B offset inside the old history translates to
// the A offset it was copied from, and a consumer group that read B
// resumes on A at the record after its last one. A second topic, written on
// A after the failover (an unplanned one), goes FAILED naming its divergent
// tail. Then round again: orders fails over back to A and ab, restarted
// with continue, copies only A's new records to B.
func TestScenarioFailback(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ab := newEngineEnv(t, devcluster.Config{})
	a, b := ab.Clusters.SourceAddr(), ab.Clusters.DestinationAddr()
	for _, topic := range []string{"orders", "payments"} {
		if err := ab.Clusters.Source.CreateTopic(topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			workertest.ProduceRecords(t, workertest.Plain(a), seq(topic, p, "a", 20)...)
		}
		produceTransactionsEnding(t, a, topic, 2, []bool{true, false, true})
		for p := int32(0); p < 2; p++ {
			workertest.ProduceRecords(t, workertest.Plain(a), seq(topic, p, "a2", 5)...)
		}
	}
	// ledger's log ends in an aborted transaction: past its last mirrored
	// record A holds only markers and aborted records, no divergent tail.
	if err := ab.Clusters.Source.CreateTopic("ledger", 2, nil); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		workertest.ProduceRecords(t, workertest.Plain(a), seq("ledger", p, "a", 20)...)
	}
	produceTransactionsEnding(t, a, "ledger", 2, []bool{true, false})
	// refunds will hold a divergent tail that the failback keeps.
	if err := ab.Clusters.Source.CreateTopic("refunds", 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.ProduceRecords(t, workertest.Plain(a), seq("refunds", 0, "a", 20)...)
	ab.CreateMirror("ab", "orders|payments|ledger|refunds")
	ab.StartInstanceOpts("a-to-b", workertest.InstanceOpts{SourceState: statetopic.ReadState})
	relay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: ab.Pool, Destination: workertest.Plain(b),
		Partitions: 3, Interval: 50 * time.Millisecond, CheckpointInterval: 200 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Stop)
	ab.WaitStates("ab", service.StateMirroring, 20*time.Second)
	for _, topic := range []string{"orders", "payments", "ledger"} {
		workertest.WaitMirrored(t, ab.Env, topic, 2, 30*time.Second)
	}
	workertest.WaitMirrored(t, ab.Env, "refunds", 1, 30*time.Second)

	// Failover: the topics stop on B's side and B takes writes.
	if _, err := ab.Svc.RemoveTopics(ctx, "ab", "orders|payments|ledger|refunds"); err != nil {
		t.Fatal(err)
	}
	ab.WaitStates("ab", service.StateStopped, 20*time.Second)
	waitStoppedPublished(t, b, "ab", []string{"orders", "payments", "ledger"}, 2)
	aBefore := map[string][][]string{}
	for _, topic := range []string{"orders", "payments", "ledger"} {
		for p := int32(0); p < 2; p++ {
			aBefore[topic] = append(aBefore[topic], values(workertest.ReadAll(t, a, topic, p, true)))
			workertest.ProduceRecords(t, workertest.Plain(b), seq(topic, p, "b", 15)...)
		}
	}
	// A consumer group reads orders on B while it is the primary: one
	// partition stops inside the old history, the other among B's new
	// records (B offset 33 is the third new one: B holds 31 old records).
	bAdm, err := workertest.Plain(b).NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer bAdm.Close()
	if err := bAdm.CommitAllOffsets(ctx, "readers", kadm.OffsetsList{
		{Topic: "orders", Partition: 0, At: 23, LeaderEpoch: -1},
		{Topic: "orders", Partition: 1, At: 33, LeaderEpoch: -1},
		// At B's first new record: across the tail A kept, rounded down.
		{Topic: "refunds", Partition: 0, At: 20, LeaderEpoch: -1}}.Offsets()); err != nil {
		t.Fatal(err)
	}
	// An unplanned failover: A took writes B never had.
	workertest.ProduceRecords(t, workertest.Plain(a), seq("payments", 1, "late-on-a", 3)...)
	waitStoppedPublished(t, b, "ab", []string{"refunds"}, 1)
	refundsBefore := values(workertest.ReadAll(t, a, "refunds", 0, true))
	workertest.ProduceRecords(t, workertest.Plain(a), seq("refunds", 0, "late-on-a", 2)...)
	workertest.ProduceRecords(t, workertest.Plain(b), seq("refunds", 0, "b", 15)...)

	// Failback: deployment ba mirrors B into A, continuing what A holds.
	ba := &engineEnv{workertest.NewEnvOn(t, ab.Clusters)}
	ba.T = t
	if _, err := ba.Svc.CreateMirror(ctx, service.MirrorInput{Name: "ba",
		Source: service.SourceInput{BootstrapServers: b}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	checkContinuationPreview(t, ba, a)
	if _, err := ba.Svc.AddTopics(ctx, "ba", service.AddTopicsInput{Topic: "orders|payments|ledger", Continue: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ba.Svc.AddTopics(ctx, "ba", service.AddTopicsInput{Topic: "refunds", Continue: true, KeepDivergent: true}); err != nil {
		t.Fatal(err)
	}
	ba.StartInstanceOpts("b-to-a", workertest.InstanceOpts{Dest: workertest.Plain(a), SourceState: statetopic.ReadState, Sync: true})

	for _, topic := range []string{"orders", "ledger"} {
		for p := int32(0); p < 2; p++ {
			ba.waitPartition("ba", topic, p, 30*time.Second, "MIRRORING", func(r repo.Partition) bool {
				return r.State == service.StateMirroring && r.DstNext != nil
			})
		}
	}
	ba.waitPartition("ba", "payments", 0, 30*time.Second, "MIRRORING", func(r repo.Partition) bool {
		return r.State == service.StateMirroring
	})
	tail := ba.waitPartition("ba", "payments", 1, 30*time.Second, "FAILED on the divergent tail", func(r repo.Partition) bool {
		return r.State == service.StateFailed
	})
	if !strings.Contains(tail.Error, "divergent tail") || !strings.Contains(tail.Error, "3 record(s) at offsets [37, 40)") {
		t.Errorf("payments/1's error does not name the 3-record divergent tail: %q", tail.Error)
	}

	// refunds kept its tail (A's offsets 20 and 21) and continued after it.
	kept := ba.waitPartition("ba", "refunds", 0, 30*time.Second, "MIRRORING after its kept tail", func(r repo.Partition) bool {
		return r.State == service.StateMirroring && r.DstNext != nil
	})
	if d := kept.DivergentTail; d == nil || *d != (repo.DivergentTail{Start: 20, End: 22, Records: 2}) {
		t.Errorf("refunds/0's row keeps divergent tail %+v, want [20, 22) of 2 records", d)
	}
	if _, msgs := ba.stateEvents("ba", "refunds", 0); !strings.Contains(strings.Join(msgs, " | "),
		"kept a divergent tail of 2 record(s) at destination offsets [20, 22)") {
		t.Errorf("refunds/0's events do not name the kept tail: %v", msgs)
	}
	wantRefunds := append(append(append([]string{}, refundsBefore...), values(seq("refunds", 0, "late-on-a", 2))...),
		values(seq("refunds", 0, "b", 15))...)
	workertest.WaitFor(t, 30*time.Second, "refunds/0 on A to be its history, its tail and B's new records", func() (bool, string) {
		got := values(workertest.ReadAll(t, a, "refunds", 0, true))
		return strings.Join(got, ",") == strings.Join(wantRefunds, ","), fmt.Sprintf("%d records, want %d", len(got), len(wantRefunds))
	})
	// B's offset 20, its first new record, is A's 22 exactly; a consumer
	// resuming there never read the tail, so it rounds down to the tail.
	for src, want := range map[int64]service.Translation{
		19: {SourceOffset: 19, DestinationOffset: 19, Exact: true},
		20: {SourceOffset: 20, DestinationOffset: 20, Exact: false},
		21: {SourceOffset: 21, DestinationOffset: 23, Exact: true},
	} {
		if tr, err := ba.Svc.Translate(ctx, "ba", "refunds", 0, src); err != nil || tr != want {
			t.Errorf("B's refunds/0 offset %d translates to %+v (%v), want %+v", src, tr, err, want)
		}
	}

	// A holds its old records, then exactly B's new ones.
	for _, topic := range []string{"orders", "payments", "ledger"} {
		for p := int32(0); p < 2; p++ {
			if topic == "payments" && p == 1 {
				continue
			}
			want := append(append([]string{}, aBefore[topic][p]...), values(seq(topic, p, "b", 15))...)
			workertest.WaitFor(t, 30*time.Second, fmt.Sprintf("%s/%d on A to be its history and B's new records", topic, p), func() (bool, string) {
				got := values(workertest.ReadAll(t, a, topic, p, true))
				return strings.Join(got, ",") == strings.Join(want, ","), fmt.Sprintf("%d records, want %d", len(got), len(want))
			})
		}
	}
	// Inside the old history the reversed old map translates: B's offset
	// 23 is the first record of A's third transaction, at A's offset 28
	// (20 plain records, a committed transaction of 3 and its marker, an
	// aborted one of 3 and its marker).
	tr, err := ba.Svc.Translate(ctx, "ba", "orders", 0, 23)
	if err != nil {
		t.Fatal(err)
	}
	if tr.DestinationOffset != 28 || !tr.Exact {
		t.Errorf("B's orders/0 offset 23 translates to %d on A (exact %v), want 28 exactly", tr.DestinationOffset, tr.Exact)
	}
	// The group resumes on A at the record after its last one: A's 28
	// inside the old history (through the old map reversed), 39 among the
	// new copies (A's 37 is B's 31).
	if _, err := ba.Svc.SyncMirror(ctx, "ba"); err != nil {
		t.Fatal(err)
	}
	aAdm, err := workertest.Plain(a).NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer aAdm.Close()
	got, err := aAdm.FetchOffsets(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 28, 1: 39} {
		if o, ok := got.Lookup("orders", p); !ok || o.At != want {
			t.Errorf("group readers on A, orders/%d: %+v, want offset %d", p, o, want)
		}
	}
	if o, ok := got.Lookup("refunds", 0); !ok || o.At != 20 {
		t.Errorf("group readers on A, refunds/0: %+v, want offset 20, the start of the kept tail", o)
	}
	steps, msgs := ba.stateEvents("ba", "orders", 0)
	if len(msgs) == 0 || !strings.Contains(strings.Join(msgs, " | "), "continued: destination offsets up to") {
		t.Errorf("orders/0's events do not say the history was continued: %v %v", steps, msgs)
	}

	// And round again: orders fails over back to A (ba publishes its state
	// to A's __mirror_state), A takes writes, and ab, restarted with
	// continue, proves B's whole history from ba's map (which carries ab's
	// own, reversed twice) and copies only A's new records to B.
	baRelay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: ba.Pool, Destination: workertest.Plain(a),
		Partitions: 3, Interval: 50 * time.Millisecond, CheckpointInterval: 200 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := baRelay.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(baRelay.Stop)
	if _, err := ba.Svc.RemoveTopics(ctx, "ba", "orders"); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		ba.waitPartition("ba", "orders", p, 20*time.Second, "STOPPED", func(r repo.Partition) bool { return r.State == service.StateStopped })
	}
	waitStoppedPublished(t, a, "ba", []string{"orders"}, 2)
	bBefore := [][]string{}
	for p := int32(0); p < 2; p++ {
		bBefore = append(bBefore, values(workertest.ReadAll(t, b, "orders", p, true)))
		workertest.ProduceRecords(t, workertest.Plain(a), seq("orders", p, "a3", 10)...)
	}
	if _, err := ab.Svc.AddTopics(ctx, "ab", service.AddTopicsInput{Topic: "orders", Continue: true}); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		want := append(append([]string{}, bBefore[p]...), values(seq("orders", p, "a3", 10))...)
		workertest.WaitFor(t, 30*time.Second, fmt.Sprintf("orders/%d on B to be its history and A's new records", p), func() (bool, string) {
			got := values(workertest.ReadAll(t, b, "orders", p, true))
			return strings.Join(got, ",") == strings.Join(want, ","), fmt.Sprintf("%d records, want %d", len(got), len(want))
		})
		ab.waitPartition("ab", "orders", p, 20*time.Second, "MIRRORING", func(r repo.Partition) bool { return r.State == service.StateMirroring })
	}
	if _, msgs := ab.stateEvents("ab", "orders", 1); !strings.Contains(strings.Join(msgs, " | "), "by mirror ba's offset map") {
		t.Errorf("ab's orders/1 did not continue from ba's map: %v", msgs)
	}
	// A's offset 28 (its third transaction's first record) is still B's 23.
	tr, err = ab.Svc.Translate(ctx, "ab", "orders", 0, 28)
	if err != nil {
		t.Fatal(err)
	}
	if tr.DestinationOffset != 23 || !tr.Exact {
		t.Errorf("A's orders/0 offset 28 translates to %d on B (exact %v), want 23 exactly", tr.DestinationOffset, tr.Exact)
	}
}

// checkContinuationPreview checks what an add's dry run with continue says
// ba would do on A, before anything is added: each partition's proof, what
// is left to copy, and the divergent tails, with and without
// keep_divergent.
func checkContinuationPreview(t *testing.T, ba *engineEnv, a string) {
	t.Helper()
	svc, err := service.NewControl(service.Config{Pool: ba.Pool, Catalog: service.KafkaCatalog(5 * time.Second),
		Destination: workertest.Plain(a), SourceState: statetopic.ReadState})
	if err != nil {
		t.Fatal(err)
	}
	preview := func(keep bool) map[string]service.PartitionContinuation {
		res, err := svc.AddTopics(t.Context(), "ba", service.AddTopicsInput{Topic: "orders|payments|refunds",
			Continue: true, KeepDivergent: keep, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]service.PartitionContinuation{}
		for _, tc := range res.Continuation {
			for _, p := range tc.Partitions {
				out[fmt.Sprintf("%s/%d", tc.Topic, p.Partition)] = p
			}
		}
		return out
	}
	got := preview(false)
	if len(got) != 5 {
		t.Fatalf("the preview has %d partitions, want 5: %+v", len(got), got)
	}
	o := got["orders/0"]
	if o.Outcome != service.ContinueAfterOverlap || o.Proof != service.ProofOffsetMap || o.ProvenBy != "ab" ||
		o.RecordsToCopy != 15 || o.DivergentTail != nil || o.OverlapSourceOffset == nil || *o.OverlapSourceOffset != 30 {
		t.Errorf("orders/0 preview: %+v, want continue by ab's offset map from B's offset 30, 15 to copy", o)
	}
	if p := got["payments/1"]; p.Outcome != service.ContinueRefused || p.DivergentTail == nil ||
		*p.DivergentTail != (service.DivergentTail{Start: 37, End: 40, Records: 3}) || !strings.Contains(p.Detail, "keep_divergent") {
		t.Errorf("payments/1 preview: %+v, want fail on the 3-record tail at [37, 40)", p)
	}
	if r := got["refunds/0"]; r.Outcome != service.ContinueRefused || r.DivergentTail == nil || r.DivergentTail.Records != 2 {
		t.Errorf("refunds/0 preview without keep_divergent: %+v, want fail on a 2-record tail", r)
	}
	if r := preview(true)["refunds/0"]; r.Outcome != service.ContinueAfterOverlap || r.DivergentTail == nil ||
		*r.DivergentTail != (service.DivergentTail{Start: 20, End: 22, Records: 2}) || r.RecordsToCopy != 15 {
		t.Errorf("refunds/0 preview with keep_divergent: %+v, want continue after the tail [20, 22), 15 to copy", r)
	}
	if n := len(ba.Partitions("ba")); n != 0 {
		t.Errorf("the dry runs wrote %d partition rows", n)
	}
}

// waitStoppedPublished waits until the __mirror_state at addr holds each
// partition of the topics STOPPED with its last mirrored offsets.
func waitStoppedPublished(t testing.TB, addr, mirror string, topics []string, partitions int32) {
	t.Helper()
	workertest.WaitFor(t, time.Minute, "the STOPPED partitions in "+service.StateTopic, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		latest, err := statetopic.ReadState(ctx, kafkaconn.Config{BootstrapServers: []string{addr}})
		if err != nil {
			return false, err.Error()
		}
		snap, err := service.DecodeState(latest)
		if err != nil {
			return false, err.Error()
		}
		stopped := 0
		for _, r := range snap.Partitions {
			if r.Mirror == mirror && slices.Contains(topics, r.Topic) && r.State == service.StateStopped && r.LastMirroredSrc != nil {
				stopped++
			}
		}
		return stopped == len(topics)*int(partitions), fmt.Sprintf("%d stopped", stopped)
	})
}

// values are the records' values, in order.
func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// TestScenarioContinueWithoutProof: continue on a destination that holds
// records while the source has no __mirror_state to prove them by (the
// source was never a kmirror destination) fails for good, saying so and how
// to start over; nothing is copied.
func TestScenarioContinueWithoutProof(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("orders", 0, "src", 10)...)
	env.CreateDestinationTopics(1, "orders")
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.DestinationAddr()), seq("orders", 0, "dst", 4)...)
	if _, err := env.Svc.CreateMirror(t.Context(), service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(t.Context(), "m", service.AddTopicsInput{Topic: "orders", Continue: true}); err != nil {
		t.Fatal(err)
	}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{SourceState: statetopic.ReadState})
	row := env.waitPartition("m", "orders", 0, 30*time.Second, "FAILED, not retried", func(r repo.Partition) bool {
		return r.State == service.StateFailed && !r.Retryable
	})
	if !strings.Contains(row.Error, "cannot be proven to be the source's history") || !strings.Contains(row.Error, "recreate") {
		t.Fatalf("error %q does not say the history cannot be proven and how to start over", row.Error)
	}
	if got := values(workertest.ReadAll(t, env.Clusters.DestinationAddr(), "orders", 0, false)); len(got) != 4 {
		t.Fatalf("destination has %d records, want its own 4", len(got))
	}
}
