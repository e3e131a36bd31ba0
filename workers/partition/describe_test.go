package partition_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
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

// TestDescribeShowsADeadOwner: after an instance crashes, its partitions
// still read MIRRORING, but describe says the lease is no longer live once
// the owner's session lapses, and when the owner last renewed; a new owner
// makes them live again, and progress moves on.
func TestDescribeShowsADeadOwner(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "orders")
	i1 := env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	ctx := context.Background()
	rows := func() []service.PartitionRow {
		ps, err := env.Svc.ListPartitions(ctx, service.PartitionFilter{Mirror: "m"})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	for _, p := range rows() {
		if !p.LeaseLive || p.Owner != "i1" || p.OwnerRenewedAt == nil {
			t.Fatalf("orders/%d before the crash: live=%v owner=%q renewed=%v", p.Partition, p.LeaseLive, p.Owner, p.OwnerRenewedAt)
		}
	}
	i1.Crash()
	workertest.WaitFor(t, workertest.TTL+5*time.Second, "the dead owner's leases to show as not live", func() (bool, string) {
		desc := ""
		ok := true
		for _, p := range rows() {
			desc += fmt.Sprintf("%d:%s live=%v ", p.Partition, p.State, p.LeaseLive)
			if p.LeaseLive || p.State != service.StateMirroring {
				ok = false
			}
		}
		return ok, desc
	})
	var lastRenewed time.Time
	for _, p := range rows() {
		lastRenewed = *p.OwnerRenewedAt
		if time.Since(lastRenewed) < workertest.TTL-time.Second {
			t.Errorf("orders/%d: owner renewed %s ago, yet its lease lapsed", p.Partition, time.Since(lastRenewed))
		}
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 5, kgo.NoCompression())
	env.StartInstance("i2")
	workertest.WaitFor(t, 20*time.Second, "a new owner with progress", func() (bool, string) {
		desc := ""
		ok := true
		for _, p := range rows() {
			desc += fmt.Sprintf("%d:%s live=%v owner=%s progressed=%v ", p.Partition, p.State, p.LeaseLive, p.Owner, p.ProgressedAt)
			if !p.LeaseLive || p.Owner != "i2" || p.ProgressedAt == nil || !p.ProgressedAt.After(lastRenewed) {
				ok = false
			}
		}
		return ok, desc
	})
}

// TestDescribeShowsASourceThatCannotBeReached: when the source goes away,
// the partitions stay MIRRORING (kgo keeps retrying) but within seconds
// their error says why nothing moves, and the erroring count that the
// metrics read includes them.
func TestDescribeShowsASourceThatCannotBeReached(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	env.Clusters.Source.Close() // the source cluster goes away for good

	ctx := context.Background()
	workertest.WaitFor(t, 30*time.Second, "the fetch error in every row", func() (bool, string) {
		ps, err := env.Svc.ListPartitions(ctx, service.PartitionFilter{Mirror: "m"})
		if err != nil {
			t.Fatal(err)
		}
		desc := ""
		ok := len(ps) == 2
		for _, p := range ps {
			desc += fmt.Sprintf("%d:%s %q ", p.Partition, p.State, p.Error)
			if p.State != service.StateMirroring || !strings.Contains(p.Error, "fetching from the source has failed since") {
				ok = false
			}
		}
		return ok, desc
	})
	counts, err := repo.PartitionsCountByState(ctx, env.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].State != "MIRRORING" || counts[0].Erroring != 2 {
		t.Fatalf("state counts %+v, want 2 MIRRORING partitions erroring", counts)
	}
}

// TestDescribeShowsADestinationThatCannotBeReached: with the destination
// gone, every partition's describe row says why nothing moves: records
// never sent fail (the partition goes FAILED and retries with backoff, the
// dial error in its row through the retry), and a produce that kgo keeps retrying because
// it may already have landed shows while the partition stays MIRRORING.
func TestDescribeShowsADestinationThatCannotBeReached(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 20*time.Second)
	env.Clusters.Destination.Close() // the destination goes away for good
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 10, kgo.NoCompression())

	ctx := context.Background()
	seen := map[int32]string{}
	workertest.WaitFor(t, 30*time.Second, "a destination error in every row", func() (bool, string) {
		ps, err := env.Svc.ListPartitions(ctx, service.PartitionFilter{Mirror: "m"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if strings.Contains(p.Error, "producing to the destination has failed") ||
				(p.RetryAttempt > 0 && strings.Contains(p.Error, "dial")) {
				seen[p.Partition] = p.Error
			}
		}
		return len(seen) == 2, fmt.Sprint(seen)
	})
	// A retry keeps the failure's cause on the row while it dials again.
	workertest.WaitFor(t, 20*time.Second, "a retrying row that keeps the error", func() (bool, string) {
		ps, err := env.Svc.ListPartitions(ctx, service.PartitionFilter{Mirror: "m"})
		if err != nil {
			t.Fatal(err)
		}
		desc := ""
		for _, p := range ps {
			if p.State == service.StatePreparing && p.RetryAttempt > 0 && strings.Contains(p.Error, "dial") {
				return true, ""
			}
			desc += fmt.Sprintf("%d:%s attempt=%d %q ", p.Partition, p.State, p.RetryAttempt, p.Error)
		}
		return false, desc
	})
}
