package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/service"
)

// TestPreviewRemoveCountsDataRecords: the failover preview counts the data
// records a failover now would leave behind, transaction markers and
// aborted records excluded, where its lag counts source offsets: three
// records committed one transaction each are 3 records in 6 offsets.
func TestPreviewRemoveCountsDataRecords(t *testing.T) {
	t.Parallel()
	svc, _, bootstrap := newService(t)
	ctx := t.Context()
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m1",
		Source: service.SourceInput{BootstrapServers: bootstrap}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	produce := func(partition int32, txn string, commit bool, values ...string) {
		t.Helper()
		opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner())}
		if txn != "" {
			opts = append(opts, kgo.TransactionalID(txn))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if txn != "" {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: partition, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if txn != "" {
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, v := range []string{"a", "b", "c"} { // each record and its commit marker
		produce(0, "tx-"+v, true, v)
	}
	produce(1, "tx1", false, "aborted") // a record and its abort marker
	produce(2, "", false, "x", "y")

	res, err := svc.PreviewRemoveTopics(ctx, "m1", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failover) != 1 || len(res.Failover[0].Partitions) != 3 {
		t.Fatalf("preview %+v", res.Failover)
	}
	top := res.Failover[0]
	for i, want := range []struct{ lag, records int64 }{{6, 3}, {2, 0}, {2, 2}} {
		p := top.Partitions[i]
		if p.Lag == nil || *p.Lag != want.lag || p.Records == nil || *p.Records != want.records {
			t.Errorf("orders/%d: lag %v, records %v; want lag %d, records %d", p.Partition, p.Lag, p.Records, want.lag, want.records)
		}
	}
	if top.Lag != 10 || top.Records != 5 {
		t.Errorf("orders: lag %d, records %d; want 10 and 5", top.Lag, top.Records)
	}
}
