package partition_test

import (
	"context"
	"testing"
	"time"

	"kmirror/internal/devcluster"
	"kmirror/service"
)

// TestDescribeColumnsAgreeUnderLoad samples the describe rows while a
// producer writes: the destination started empty and the source at offset
// 0 with no transactions, so offsets map one to one and every MIRRORING
// row must satisfy lag = SOURCE-OFFSET − DESTINATION-OFFSET; in particular
// a row with equal offsets shows lag 0.
func TestDescribeColumnsAgreeUnderLoad(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	stopTraffic := startTraffic(t, env.Clusters.SourceAddr(), []string{"orders"}, 3)
	defer stopTraffic()

	ctx := context.Background()
	var rows, equal int
	for until := time.Now().Add(5 * time.Second); time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
		ps, err := env.Svc.ListPartitions(ctx, service.PartitionFilter{Mirror: "m"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.State != service.StateMirroring || p.SourceOffset == nil || p.DestinationOffset == nil || p.Lag == nil {
				continue
			}
			rows++
			src, dst, lag := *p.SourceOffset, *p.DestinationOffset, *p.Lag
			if src == dst {
				equal++
			}
			if lag != src-dst {
				t.Errorf("orders/%d: source %d, destination %d, lag %d: the columns disagree", p.Partition, src, dst, lag)
			}
		}
	}
	if rows == 0 {
		t.Fatal("no MIRRORING row with offsets was sampled")
	}
	t.Logf("%d rows sampled under load, %d caught up", rows, equal)
}
