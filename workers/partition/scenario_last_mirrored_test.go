package partition_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// TestScenarioLastMirroredOffsets: a failover leaves the offsets of the last
// record copied, on the source and on the destination, as a fact: in
// describe, in the STOPPED event, in __mirror_state, and in a database
// restored from it. The source's transactions put markers and aborted
// records between the last copied record and the source end, so the
// checkpoint's src_next − 1 is not it.
func TestScenarioLastMirroredOffsets(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	const topic, partitions = "orders", 2
	if err := env.Clusters.Source.CreateTopic(topic, partitions, nil); err != nil {
		t.Fatal(err)
	}
	src := env.Clusters.SourceAddr()
	dest := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}}
	workertest.Produce(t, src, topic, partitions, 6, kgo.NoCompression())
	// Committed, aborted, committed, then aborted last: the source ends
	// with an abort marker after aborted records, none of them copied.
	produceTransactionsEnding(t, src, topic, partitions, []bool{true, false, true, false})

	env.CreateMirror("m", topic)
	env.StartInstance("i1")
	relay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: env.Pool, Partitions: 5, Destination: dest,
		Interval: 50 * time.Millisecond, CheckpointInterval: 300 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Stop)
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitMirrored(t, env.Env, topic, partitions, 20*time.Second)
	ctx := context.Background()
	if _, err := env.Svc.RemoveTopics(ctx, "m", topic); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateStopped, 20*time.Second)

	// What the clusters say was copied last.
	want := map[int32]service.LastMirrored{}
	for p := int32(0); p < partitions; p++ {
		s := workertest.ReadAll(t, src, topic, p, true)
		d := workertest.ReadAll(t, env.Clusters.DestinationAddr(), topic, p, false)
		if len(s) == 0 || len(s) != len(d) {
			t.Fatalf("%s/%d: %d committed source records, %d on the destination", topic, p, len(s), len(d))
		}
		last := service.LastMirrored{SourceOffset: s[len(s)-1].Offset, DestinationOffset: d[len(d)-1].Offset}
		if string(s[len(s)-1].Value) != string(d[len(d)-1].Value) {
			t.Fatalf("%s/%d: the last records differ: %q and %q", topic, p, s[len(s)-1].Value, d[len(d)-1].Value)
		}
		row := env.Partition("m", topic, p)
		if row.SrcNext == nil || *row.SrcNext-1 == last.SourceOffset {
			t.Fatalf("%s/%d: the test needs markers after the last record: %s, last %+v", topic, p, describePartition(row), last)
		}
		want[p] = last
	}

	// Describe.
	page, err := env.Svc.ListPartitionsPage(ctx, service.PartitionFilter{Mirror: "m"}, service.PartitionPageParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Rows {
		if r.LastMirrored == nil || *r.LastMirrored != want[r.Partition] {
			t.Fatalf("%s/%d: describe's last mirrored %+v, want %+v", r.Topic, r.Partition, r.LastMirrored, want[r.Partition])
		}
	}

	// The STOPPED event.
	evs, err := repo.EventsList(ctx, env.Pool, repo.EventsListParams{Mirror: "m", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	stopped := map[int32]bool{}
	for _, e := range evs {
		var d service.PartitionEventData
		if e.Kind != service.EventPartitionState || json.Unmarshal(e.Data, &d) != nil || d.To != "STOPPED" {
			continue
		}
		w := want[d.Partition]
		note := fmt.Sprintf("last mirrored source offset %d → destination offset %d", w.SourceOffset, w.DestinationOffset)
		if d.LastMirrored == nil || *d.LastMirrored != w || !strings.HasSuffix(e.Message, note) {
			t.Fatalf("%s/%d: STOPPED event %q with %s, want %+v", topic, d.Partition, e.Message, e.Data, w)
		}
		stopped[d.Partition] = true
	}
	if len(stopped) != partitions {
		t.Fatalf("STOPPED events for %v, want every partition", stopped)
	}

	// __mirror_state on the destination.
	var latest map[string][]byte
	workertest.WaitFor(t, 20*time.Second, "STOPPED partition records with their last mirrored offsets", func() (bool, string) {
		latest, err = statetopic.ReadState(ctx, dest)
		if err != nil {
			return false, err.Error()
		}
		var got []string
		ok := true
		for p := int32(0); p < partitions; p++ {
			var rec service.PartitionRecord
			if err := json.Unmarshal(latest[service.PartitionKey("m", topic, p)], &rec); err != nil {
				return false, err.Error()
			}
			w := want[p]
			ok = ok && rec.State == service.StateStopped && rec.LastMirroredSrc != nil && rec.LastMirroredDst != nil &&
				*rec.LastMirroredSrc == w.SourceOffset && *rec.LastMirroredDst == w.DestinationOffset
			got = append(got, fmt.Sprintf("%d: %s %v %v", p, rec.State, rec.LastMirroredSrc, rec.LastMirroredDst))
		}
		return ok, strings.Join(got, "; ")
	})

	// Restored into an empty database, they are the same.
	fresh := testdb.Pool(t)
	restored, err := service.NewControl(service.Config{Pool: fresh, Catalog: service.KafkaCatalog(3 * time.Second), Secrets: workertest.SecretKeys})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restored.Restore(ctx, latest); err != nil {
		t.Fatal(err)
	}
	page, err = restored.ListPartitionsPage(ctx, service.PartitionFilter{Mirror: "m"}, service.PartitionPageParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Rows) != partitions {
		t.Fatalf("restored %d partitions", len(page.Rows))
	}
	for _, r := range page.Rows {
		if r.State != service.StateStopped || r.LastMirrored == nil || *r.LastMirrored != want[r.Partition] {
			t.Fatalf("%s/%d restored: %s, last mirrored %+v, want %+v", r.Topic, r.Partition, r.State, r.LastMirrored, want[r.Partition])
		}
	}
}

// produceTransactionsEnding writes one transaction per entry of commits to
// every partition, committed (true) or aborted (false), in that order.
func produceTransactionsEnding(t *testing.T, addr, topic string, partitions int32, commits []bool) {
	t.Helper()
	tx, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("last-mirrored-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for n, commit := range commits {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for p := range partitions {
			for i := range 3 {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p,
					Value: fmt.Appendf(nil, "tx%d-%v-%d-%d", n, commit, p, i)})
			}
		}
		if err := tx.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := tx.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
}
