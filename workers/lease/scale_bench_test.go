package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kmirror/internal/runtime/notifier"
	"kmirror/internal/testing/syncbuf"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"

	"github.com/jackc/pgx/v5/pgconn"
)

// scaleRunner stands in for the partition engine at scale: it holds the
// leases it is given and, like the engine's checkpointer and offsets
// refresher, writes every held partition's row in bulk statements fenced by
// owner and epoch, so renewals compete with the same write load.
type scaleRunner struct {
	mu     sync.Mutex
	leases map[Key]*Lease
}

func (r *scaleRunner) DeliveryTimeout() time.Duration { return 0 }

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
func (r *scaleRunner) write(ctx context.Context, pool repo.DBTX, owner string, deadlocks *atomic.Int64, tb testing.TB) {
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
		count := func(what string, err error) {
			if err == nil || ctx.Err() != nil {
				return
			}
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "40P01" {
				deadlocks.Add(1)
			}
			tb.Logf("%s: %v", what, err)
		}
		_, err := repo.CheckpointsSave(wctx, pool, owner, cps)
		count("checkpoint save", err)
		if n%2 == 0 {
			_, err := repo.PartitionsSetEnds(wctx, pool, owner, ends)
			count("end offsets", err)
		}
		cancel()
	}
}

// BenchmarkLeasesAtScale: instances with production lease timings (TTL
// 15s, renewal every 5s, trust window 10s) take every partition lease while
// their rows take the engine's write load, then hold them while a 3s stall
// of the session rows and a 3s lock on every partition row are injected.
// It reports how long taking them all took, how many leases were lost or
// expired, and how many statements failed with a deadlock (40P01); the
// goal is none of each. Two shapes: one instance with 5,000 partitions,
// and three instances sharing 300.
//
//	go test ./workers/lease -run '^$' -bench LeasesAtScale -benchtime=1x
//
// KMIRROR_BENCH_HOLD (default 2m) sets how long the leases are held after
// settling; the 10-minute hold of docs/benchmarks.md is
// KMIRROR_BENCH_HOLD=10m.
func BenchmarkLeasesAtScale(b *testing.B) {
	hold := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_BENCH_HOLD")); err == nil {
		hold = d
	}
	b.Run("1x5000", func(b *testing.B) { benchLeases(b, 1, 50, 100, hold) })
	b.Run("3x300", func(b *testing.B) { benchLeases(b, 3, 3, 100, hold) })
}

func benchLeases(b *testing.B, instances, topics, perTopic int, hold time.Duration) {
	ctx := context.Background()
	dbURL := testdb.New(b)
	admin := openPool(b, dbURL)
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('big', 'h:1')`,
		fmt.Sprintf(`INSERT INTO mirror_topics (mirror, topic, desired_state)
			SELECT 'big', 't' || g, 'mirroring' FROM generate_series(1, %d) g`, topics),
		fmt.Sprintf(`INSERT INTO mirror_partitions (mirror, topic, partition, state)
			SELECT 'big', 't' || g, p, 'MIRRORING' FROM generate_series(1, %d) g, generate_series(0, %d) p`, topics, perTopic-1),
		fmt.Sprintf(`INSERT INTO instances (id) SELECT 'i' || g FROM generate_series(1, %d) g`, instances),
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	total := topics * perTopic
	var lost, expired, deadlocks atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	type node struct {
		runner *scaleRunner
		mgr    *Manager
		notes  *notifier.Notifier
	}
	var nodes []node
	logs := &syncbuf.Buffer{}
	for i := 1; i <= instances; i++ {
		id := fmt.Sprint("i", i)
		pool := openPool(b, dbURL)
		runner := &scaleRunner{leases: map[Key]*Lease{}}
		notes, err := notifier.New(notifier.Config{Listen: repo.Notifications(pool), Channels: repo.Channels})
		if err != nil {
			b.Fatal(err)
		}
		mgr, err := NewManager(ManagerConfig{Pool: pool, InstanceID: id, Partitions: runner, Notifier: notes,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			b.Fatal(err)
		}
		mgr.TestSignals.Lost.Init()
		mgr.TestSignals.Expired.Init()
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
		nodes = append(nodes, node{runner, mgr, notes})
	}
	held := func() int {
		n := 0
		for _, nd := range nodes {
			n += len(nd.runner.held())
		}
		return n
	}

	b.ResetTimer()
	start := time.Now()
	writeCtx, stopWrites := context.WithCancel(ctx)
	var writes sync.WaitGroup
	for i, nd := range nodes {
		if err := nd.notes.Start(ctx); err != nil {
			b.Fatal(err)
		}
		defer nd.notes.Stop()
		if err := nd.mgr.Start(ctx); err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprint("i", i+1)
		writes.Go(func() { nd.runner.write(writeCtx, nd.mgr.cfg.Pool, id, &deadlocks, b) })
	}
	for held() < total {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d leases after 5m", held(), total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	settle := time.Since(start)

	stall := func(what, sql string) {
		testdb.Stall(b, admin, sql, 3*time.Second)
		b.Logf("injected a 3s %s at %s", what, time.Since(start).Round(time.Second))
	}
	holdUntil := time.Now().Add(hold)
	time.Sleep(time.Until(holdUntil) / 3)
	stall("lock of the session rows", `SELECT 1 FROM instances FOR UPDATE`)
	time.Sleep(time.Until(holdUntil) / 2)
	stall("lock of every partition row", `SELECT 1 FROM mirror_partitions FOR UPDATE`)
	time.Sleep(time.Until(holdUntil))
	b.StopTimer()

	stopWrites()
	writes.Wait()
	for _, nd := range nodes {
		nd.mgr.Stop()
	}
	deadlocks.Add(int64(strings.Count(logs.String(), "40P01")))
	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(float64(lost.Load()), "leases-lost")
	b.ReportMetric(float64(expired.Load()), "leases-expired")
	b.ReportMetric(float64(deadlocks.Load()), "deadlocks")
	b.ReportMetric(float64(total), "partitions")
	b.Logf("%d instance(s), %d partitions: all leased in %s; held %s more with two 3s stalls: %d lost, %d expired, %d deadlocks",
		instances, total, settle.Round(time.Millisecond), hold, lost.Load(), expired.Load(), deadlocks.Load())
}
