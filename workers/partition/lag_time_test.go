package partition_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestLagInTime: lag in time (lag_ms) is the age of the oldest source record
// not yet on the destination. A caught-up partition reads 0; a paused one
// reads now − the timestamp of its first uncopied record and keeps growing
// with the wall clock while nothing is written; in a transactional
// partition it counts from the first committed record, not from an
// aborted one before it; the mirror's status carries the largest.
func TestLagInTime(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 5)
	for p := range int32(2) {
		env.waitPartition("m", "orders", p, 10*time.Second, "lag_ms 0 when caught up", func(r repo.Partition) bool {
			return r.LagMs != nil && *r.LagMs == 0
		})
	}
	ctx := context.Background()
	if _, err := env.Svc.PauseTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StatePaused, 20*time.Second)

	now := time.Now()
	plain, aborted, committed := now.Add(-time.Hour), now.Add(-2*time.Hour), now.Add(-30*time.Minute)
	var rs []*kgo.Record
	for i := range 3 {
		rs = append(rs, &kgo.Record{Topic: "orders", Partition: 0, Value: fmt.Appendf(nil, "late-%d", i),
			Timestamp: plain.Add(time.Duration(i) * time.Second)})
	}
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), rs...)
	produceTransaction(t, env.Clusters.SourceAddr(), "orders", 1, aborted, false)
	produceTransaction(t, env.Clusters.SourceAddr(), "orders", 1, committed, true)

	// Within a few refreshes, the paused partitions' ages: an hour on 0,
	// half an hour on 1 (its aborted records are two hours old, and no
	// data).
	near := func(got *int64, want time.Duration) bool {
		if got == nil {
			return false
		}
		d := time.Duration(*got) * time.Millisecond
		return d >= want && d < want+time.Minute
	}
	first := env.waitPartition("m", "orders", 0, 15*time.Second, "lag_ms ≈ now − the first uncopied record's timestamp",
		func(r repo.Partition) bool { return near(r.LagMs, time.Since(plain)-time.Second) })
	env.waitPartition("m", "orders", 1, 15*time.Second, "lag_ms counts from the first committed record",
		func(r repo.Partition) bool { return near(r.LagMs, time.Since(committed)-time.Second) })
	// Nothing writes the paused rows, yet the age grows with the clock.
	env.waitPartition("m", "orders", 0, 10*time.Second, fmt.Sprintf("lag_ms past %d ms", *first.LagMs),
		func(r repo.Partition) bool { return r.LagMs != nil && *r.LagMs > *first.LagMs })

	m, err := env.Svc.GetMirror(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Status.MaxLagMs; !near(got, time.Since(plain)-2*time.Second) {
		t.Fatalf("mirror status max_lag_ms %v, want about %v", got, time.Since(plain))
	}
	rows, err := env.Svc.ListPartitions(ctx, service.PartitionFilter{Mirror: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.LagMs == nil || *r.LagMs < (25*time.Minute).Milliseconds() {
			t.Fatalf("describe row %s/%d lag_ms %v", r.Topic, r.Partition, r.LagMs)
		}
	}

	// Resumed, the partitions catch up and read 0 again.
	if _, err := env.Svc.ResumeTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		env.waitPartition("m", "orders", p, 15*time.Second, "lag_ms 0 once caught up again", func(r repo.Partition) bool {
			return r.LagMs != nil && *r.LagMs == 0
		})
	}
}

// produceTransaction writes three records stamped at ts to one partition
// in a transaction, committed or aborted.
func produceTransaction(t *testing.T, addr, topic string, p int32, ts time.Time, commit bool) {
	t.Helper()
	tx, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(fmt.Sprintf("lag-time-%v", commit)))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 3 {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "tx-%v-%d", commit, i),
			Timestamp: ts.Add(time.Duration(i) * time.Second)})
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

// TestLagInTimeWhileMirroring: a mirroring session knows the oldest record
// not yet on the destination from the batches it has copied and not seen
// acknowledged, and its checkpoints carry it: while the destination holds
// its produce requests, a MIRRORING partition's lag_ms is the age of the
// first record held back, and 0 once the copies land.
func TestLagInTimeWhileMirroring(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.CreateSourceTopics(1, "live")
	workertest.Produce(t, env.Clusters.SourceAddr(), "live", 1, 5, kgo.NoCompression())
	env.CreateMirror("m", "live")
	// A delivery timeout longer than the copy is held below, so that the
	// partition stays MIRRORING meanwhile.
	env.StartInstanceOpts("i1", workertest.InstanceOpts{DeliveryTimeout: 20 * time.Second})
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(t, env.Env, "live", 1, 20*time.Second)
	env.waitPartition("m", "live", 0, 10*time.Second, "lag_ms 0 when caught up", func(r repo.Partition) bool {
		return r.LagMs != nil && *r.LagMs == 0
	})

	// From here the destination answers no produce until released.
	var holding atomic.Bool
	holding.Store(true)
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { holding.Store(false); close(release) })
	defer releaseAll()
	dst := env.Clusters.Destination
	dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if holding.Load() {
			dst.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	stamp := time.Now().Add(-time.Hour)
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()),
		&kgo.Record{Topic: "live", Partition: 0, Value: []byte("held"), Timestamp: stamp})
	env.waitPartition("m", "live", 0, 10*time.Second, "lag_ms ≈ an hour while the copy is held", func(r repo.Partition) bool {
		return r.State == service.StateMirroring && r.LagMs != nil &&
			*r.LagMs >= time.Since(stamp).Milliseconds()-2000 && *r.LagMs < time.Since(stamp).Milliseconds()+60_000
	})
	releaseAll()
	workertest.WaitEndsEqual(t, env.Env, "live", 1, 30*time.Second)
	env.waitPartition("m", "live", 0, 10*time.Second, "lag_ms 0 once the copy landed", func(r repo.Partition) bool {
		return r.LagMs != nil && *r.LagMs == 0
	})
}

// TestLagInTimeWhileThrottled: a throttled mirror copying a backlog has its
// copies acknowledged while its next fetched batch waits for the throttle;
// that batch is then the oldest record not copied, and lag_ms stays known
// from it rather than blank between copies.
func TestLagInTimeWhileThrottled(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.CreateSourceTopics(1, "slow")
	produced := time.Now()
	produceIncompressible(t, env.Clusters.SourceAddr(), "slow", 1, 1_000, 1024)
	ctx := context.Background()
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()},
		Config: map[string]string{service.CfgThrottledRate: "20000"}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "slow"}); err != nil {
		t.Fatal(err)
	}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{DeliveryTimeout: 10 * time.Second})
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	// Once throttled, every look for 3 s finds the lag in time known:
	// at least as old as the records are, since they were produced
	// before the mirror started.
	env.waitPartition("m", "slow", 0, 10*time.Second, "a throttled wait counted", func(r repo.Partition) bool {
		return r.ThrottledMs > 0
	})
	workertest.HoldsFor(t, 3*time.Second, "lag_ms known while throttled", func() (bool, string) {
		r := env.Partition("m", "slow", 0)
		return r.LagMs != nil && *r.LagMs > 0 && *r.LagMs <= time.Since(produced).Milliseconds(),
			fmt.Sprintf("lag_ms %v; %s", r.LagMs, describePartition(r))
	})
}
