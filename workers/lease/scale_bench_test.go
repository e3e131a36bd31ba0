package lease

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kmirror/internal/notifier"
	"kmirror/internal/testdb"
	"kmirror/repo"
)

// scaleRunner stands in for the partition engine at scale: it holds the
// leases it is given and, like the engine's checkpointer and offsets
// refresher, writes every held partition's row in bulk statements fenced by
// owner and epoch, so renewals compete with the same write load.
type scaleRunner struct {
	mu     sync.Mutex
	leases map[Key]*Lease
}

func (r *scaleRunner) StartPartition(_ context.Context, l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leases[l.Key] = l
}

func (r *scaleRunner) StopPartition(k Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.leases, k)
}

func (r *scaleRunner) held() []*Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Lease, 0, len(r.leases))
	for _, l := range r.leases {
		if l.Valid() {
			out = append(out, l)
		}
	}
	return out
}

// write saves a checkpoint for every held partition every second and its
// end offsets every two, as the engine does, until ctx ends.
func (r *scaleRunner) write(ctx context.Context, tb testing.TB, pool repo.DBTX, owner string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for n := int64(1); ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held := r.held()
		cps := make([]repo.Checkpoint, len(held))
		ends := make([]repo.EndOffsets, len(held))
		for i, l := range held {
			cps[i] = repo.Checkpoint{Mirror: l.Key.Mirror, Topic: l.Key.Topic, Partition: l.Key.Partition,
				Epoch: l.Epoch, SrcNext: n, DstNext: n, SourceEnd: n, DestinationEnd: n}
			ends[i] = repo.EndOffsets{ID: repo.PartitionID{Mirror: l.Key.Mirror, Topic: l.Key.Topic, Partition: l.Key.Partition},
				Epoch: l.Epoch, SourceEnd: n + 1, DestinationEnd: n}
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := repo.CheckpointsSave(wctx, pool, owner, cps); err != nil && ctx.Err() == nil {
			tb.Logf("checkpoint save: %v", err)
		}
		if n%2 == 0 {
			if err := repo.PartitionsSetEnds(wctx, pool, owner, ends); err != nil && ctx.Err() == nil {
				tb.Logf("end offsets: %v", err)
			}
		}
		cancel()
	}
}

// BenchmarkLeasesAtScale: one instance with production lease timings (TTL
// 15s, renewal every 5s, trust window 10s) takes 5,000 partition leases
// while its rows take the engine's write load, then holds them while a 3s
// stall of the session row and a 3s lock on every partition row are
// injected. It reports how long taking them all took and how many leases
// were lost (the goal: none).
//
//	go test ./workers/lease -run '^$' -bench LeasesAtScale -benchtime=1x
//
// KMIRROR_BENCH_HOLD (default 2m) sets how long the leases are held after
// settling; the 10 minutes is KMIRROR_BENCH_HOLD=10m.
func BenchmarkLeasesAtScale(b *testing.B) {
	const topics, perTopic = 50, 100
	hold := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_BENCH_HOLD")); err == nil {
		hold = d
	}
	ctx := context.Background()
	dbURL := testdb.New(b)
	pool := openPool(b, dbURL)
	admin := openPool(b, dbURL)
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('big', 'h:1')`,
		fmt.Sprintf(`INSERT INTO mirror_topics (mirror, topic, desired_state)
			SELECT 'big', 't' || g, 'mirroring' FROM generate_series(1, %d) g`, topics),
		fmt.Sprintf(`INSERT INTO mirror_partitions (mirror, topic, partition, state)
			SELECT 'big', 't' || g, p, 'MIRRORING' FROM generate_series(1, %d) g, generate_series(0, %d) p`, topics, perTopic-1),
		`INSERT INTO instances (id) VALUES ('solo')`,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	total := topics * perTopic
	runner := &scaleRunner{leases: map[Key]*Lease{}}
	notes, err := notifier.New(notifier.Config{Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := NewManager(ManagerConfig{Pool: pool, InstanceID: "solo", Partitions: runner, Notifier: notes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	var lost, expired atomic.Int64
	mgr.TestSignals.Lost.Init()
	mgr.TestSignals.Expired.Init()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-mgr.TestSignals.Lost.C():
				lost.Add(1)
			case <-mgr.TestSignals.Expired.C():
				expired.Add(1)
			}
		}
	}()

	b.ResetTimer()
	start := time.Now()
	if err := notes.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer notes.Stop()
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	writeCtx, stopWrites := context.WithCancel(ctx)
	var writes sync.WaitGroup
	writes.Go(func() { runner.write(writeCtx, b, pool, "solo") })
	for len(runner.held()) < total {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d leases after 5m", len(runner.held()), total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	settle := time.Since(start)

	stall := func(what, sql string) {
		tx, err := admin.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
		time.Sleep(3 * time.Second) // the injected stall itself
		if err := tx.Rollback(ctx); err != nil {
			b.Fatal(err)
		}
		b.Logf("injected a 3s %s at %s", what, time.Since(start).Round(time.Second))
	}
	holdUntil := time.Now().Add(hold)
	time.Sleep(time.Until(holdUntil) / 3)
	stall("lock of the session row", `SELECT 1 FROM instances WHERE id = 'solo' FOR UPDATE`)
	time.Sleep(time.Until(holdUntil) / 2)
	stall("lock of every partition row", `SELECT 1 FROM mirror_partitions FOR UPDATE`)
	time.Sleep(time.Until(holdUntil))
	b.StopTimer()

	stopWrites()
	writes.Wait()
	mgr.Stop()
	held := len(runner.held())
	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(float64(lost.Load()), "leases-lost")
	b.ReportMetric(float64(expired.Load()), "leases-expired")
	b.ReportMetric(float64(total), "partitions")
	b.Logf("%d partitions: all leased in %s; held %s more with two 3s stalls: %d lost, %d expired; %d still running at Stop",
		total, settle.Round(time.Millisecond), hold, lost.Load(), expired.Load(), held)
}
