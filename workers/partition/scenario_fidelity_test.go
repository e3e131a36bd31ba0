package partition_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioFidelityKcatAndTransactions: records written by an independent
// client (kcat, librdkafka) with keys, a NULL value and repeated headers,
// then a committed and an aborted transaction, arrive exactly: same keys,
// values, headers in order with duplicates, timestamps; only committed
// records; nothing added.
func TestScenarioFidelityKcatAndTransactions(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	src := env.Clusters.SourceAddr()
	// -Z turns the empty value of k3 into NULL.
	if err := kcatProduce(t, src, "orders", 0, "k1:v1\nk2:v2\nk3:\n", "-K:", "-Z", "-H", "a=1", "-H", "a=2"); err != nil {
		t.Fatal(err)
	}
	got := workertest.ReadAll(t, src, "orders", 0, true)
	if len(got) != 3 || string(got[0].Key) != "k1" || string(got[1].Value) != "v2" || got[2].Value != nil ||
		len(got[0].Headers) != 2 || got[0].Headers[0].Key != "a" || string(got[0].Headers[1].Value) != "2" {
		t.Fatalf("kcat did not write what the test expects: %d records %+v", len(got), got)
	}

	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)

	// Transactions on the source while mirroring: one committed, one aborted.
	tx, err := kgo.NewClient(kgo.SeedBrokers(src), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("fidelity-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		kind := "committed"
		if commit == kgo.TryAbort {
			kind = "aborted"
		}
		var rs []*kgo.Record
		for p := int32(0); p < 2; p++ {
			for i := 0; i < 4; i++ {
				rs = append(rs, &kgo.Record{Topic: "orders", Partition: p, Key: []byte(fmt.Sprintf("tx-%d", i)),
					Value:   []byte(fmt.Sprintf("%s-%d-%d", kind, p, i)),
					Headers: []kgo.RecordHeader{{Key: "txn", Value: []byte(kind)}, {Key: "txn", Value: nil}}})
			}
		}
		if err := tx.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	// And plain records after the aborted ones, so the gap is crossed.
	for p := int32(0); p < 2; p++ {
		if err := kcatProduce(t, src, "orders", p, "k9:after\n", "-K:", "-H", "b=x"); err != nil {
			t.Fatal(err)
		}
	}

	workertest.WaitMirrored(t, env.Env, "orders", 2, 20*time.Second)
	for p := int32(0); p < 2; p++ {
		dst := workertest.ReadAll(t, env.Clusters.DestinationAddr(), "orders", p, false)
		committed := 0
		for _, r := range dst {
			if strings.HasPrefix(string(r.Value), "aborted") {
				t.Fatalf("orders/%d: aborted record %q was mirrored", p, r.Value)
			}
			if strings.HasPrefix(string(r.Value), "committed") {
				committed++
			}
		}
		if committed != 4 {
			t.Fatalf("orders/%d: %d committed transactional records mirrored, want 4", p, committed)
		}
	}
	// Source offsets have gaps (control records, aborted data) that the
	// destination does not: the offset map says exactly where they are.
	// p0: kcat 0-2, committed 3-6, marker 7, aborted 8-11, marker 12, 13.
	// p1: committed 0-3, marker 4, aborted 5-8, marker 9, 10.
	want := "orders/0 0→0 ×7, orders/0 13→7 ×1, orders/1 0→0 ×4, orders/1 10→4 ×1"
	// Checkpoints (with their runs) are saved in batches: poll.
	workertest.WaitFor(t, 5*time.Second, "offset map runs over the gaps", func() (bool, string) {
		rows, err := env.Pool.Query(context.Background(), `SELECT topic, partition, src_start, dst_start, count
			FROM offset_map_runs WHERE mirror = 'm' ORDER BY topic, partition, src_start`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var topic string
			var p int32
			var s, d, n int64
			if err := rows.Scan(&topic, &p, &s, &d, &n); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s/%d %d→%d ×%d", topic, p, s, d, n))
		}
		return strings.Join(got, ", ") == want, strings.Join(got, ", ")
	})
}
