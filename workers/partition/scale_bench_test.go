package partition_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devcluster"
	"kmirror/internal/testdb"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkPartitionsAtScale: one instance, with the server's own timings
// and pools, mirrors 5,000 real partitions (50 topics × 100 on kfake). Once
// every partition is MIRRORING it holds them while a trickle of records
// flows (50 records/s, on random partitions) and two 3s Postgres stalls are
// injected: one on the session rows, one on every partition row. It reports
// how long settling took, the leases lost or expired and the renewals that
// failed, the partition state changes after settling, the Postgres
// deadlocks, how long the trickle took to be fully delivered once it
// stopped, and the process's CPU (kfake included) over the hold.
//
//	go test ./workers/partition -run '^$' -bench PartitionsAtScale -benchtime=1x -timeout 30m
//
// KMIRROR_BENCH_HOLD (default 2m) sets the hold; the 10 minutes is
// KMIRROR_BENCH_HOLD=10m. KMIRROR_BENCH_PARTITIONS (default 5000, a multiple
// of 100) sets the size.
func BenchmarkPartitionsAtScale(b *testing.B) {
	hold := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_BENCH_HOLD")); err == nil {
		hold = d
	}
	total := 5000
	if _, err := fmt.Sscan(os.Getenv("KMIRROR_BENCH_PARTITIONS"), &total); err != nil {
		total = 5000
	}
	const perTopic = 100
	topics := max(1, total/perTopic)
	total = topics * perTopic
	ctx := context.Background()

	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{})}
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%03d", i)
		if err := env.Clusters.Source.CreateTopic(names[i], perTopic, nil); err != nil {
			b.Fatal(err)
		}
	}
	env.CreateMirror("big", `scale-\d+`)
	var deadlocksBefore int64
	if err := env.Pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&deadlocksBefore); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	start := time.Now()
	in := env.StartInstanceOpts("i1", workertest.InstanceOpts{ProductionTimings: true, LeaseSignals: true})
	var lost, expired, renewFailed atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-in.Leases.TestSignals.Lost.C():
				lost.Add(1)
			case <-in.Leases.TestSignals.Expired.C():
				expired.Add(1)
			case <-in.Leases.TestSignals.RenewFailed.C():
				renewFailed.Add(1)
			}
		}
	}()
	countMirroring := func() int {
		var n int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM mirror_partitions
			WHERE mirror = 'big' AND state = $1 AND lease_owner IS NOT NULL`, string(service.StateMirroring)).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	for countMirroring() < total {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("only %d of %d partitions MIRRORING after 10m", countMirroring(), total)
		}
		time.Sleep(500 * time.Millisecond)
	}
	settle := time.Since(start)
	lostAtSettle := lost.Load()
	var lastEvent int64
	if err := env.Pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&lastEvent); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d partitions MIRRORING in %s (%d leases lost on the way)", total, settle.Round(time.Millisecond), lostAtSettle)

	// The trickle: 50 records a second on random partitions.
	src, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	trickleCtx, stopTrickle := context.WithCancel(ctx)
	var trickle sync.WaitGroup
	var produced atomic.Int64
	trickle.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-trickleCtx.Done():
				return
			case <-t.C:
			}
			for range 5 {
				r := &kgo.Record{Topic: names[rand.IntN(topics)], Partition: rand.Int32N(perTopic), Value: []byte("trickle")}
				if err := src.ProduceSync(trickleCtx, r).FirstErr(); err == nil {
					produced.Add(1)
				}
			}
		}
	})

	cpuBefore := cpuTime()
	holdStart := time.Now()
	holdUntil := holdStart.Add(hold)
	stall := func(what, sql string) {
		testdb.Stall(b, env.Pool, sql, 3*time.Second)
		b.Logf("injected a 3s %s at +%s", what, time.Since(holdStart).Round(time.Second))
	}
	time.Sleep(time.Until(holdUntil) / 3)
	stall("lock of the session rows", `SELECT 1 FROM instances FOR UPDATE`)
	time.Sleep(time.Until(holdUntil) / 2)
	stall("lock of every partition row", `SELECT 1 FROM mirror_partitions FOR UPDATE`)
	time.Sleep(time.Until(holdUntil))
	cpu := (cpuTime() - cpuBefore).Seconds() / time.Since(holdStart).Seconds()
	stopTrickle()
	trickle.Wait()

	// Every trickled record reaches the destination.
	stopped := time.Now()
	deliver := waitAllDelivered(b, env, names, 2*time.Minute)
	b.StopTimer()
	delivery := deliver.Sub(stopped)

	var changes, deadlocksAfter int64
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE id > $1 AND kind = $2`,
		lastEvent, service.EventPartitionState).Scan(&changes); err != nil {
		b.Fatal(err)
	}
	if err := env.Pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&deadlocksAfter); err != nil {
		b.Fatal(err)
	}
	var rss syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &rss)

	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(float64(lost.Load()), "leases-lost")
	b.ReportMetric(float64(expired.Load()), "leases-expired")
	b.ReportMetric(float64(renewFailed.Load()), "renewals-failed")
	b.ReportMetric(float64(changes), "state-changes")
	b.ReportMetric(float64(deadlocksAfter-deadlocksBefore), "deadlocks")
	b.ReportMetric(delivery.Seconds(), "delivery-s")
	b.ReportMetric(cpu, "cpu-cores")
	b.ReportMetric(float64(rss.Maxrss)/1024, "maxrss-MB")
	b.Logf("held %d partitions %s with two 3s stalls: %d leases lost, %d expired, %d renewals failed, %d state changes, %d deadlocks; "+
		"%d trickled records delivered %s after the trickle stopped; %.2f cores over the hold (kfake included), max RSS %d MB",
		total, hold, lost.Load(), expired.Load(), renewFailed.Load(), changes, deadlocksAfter-deadlocksBefore,
		produced.Load(), delivery.Round(time.Millisecond), cpu, rss.Maxrss/1024)
}

// waitAllDelivered waits until every partition's destination end equals its
// source end and returns when that was first seen.
func waitAllDelivered(b *testing.B, env *engineEnv, topics []string, timeout time.Duration) time.Time {
	b.Helper()
	ctx := context.Background()
	srcAdm := kadm.NewClient(mustClient(b, env.Clusters.SourceAddr()))
	defer srcAdm.Close()
	dstAdm := kadm.NewClient(mustClient(b, env.Clusters.DestinationAddr()))
	defer dstAdm.Close()
	want, err := srcAdm.ListEndOffsets(ctx, topics...)
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for {
		got, err := dstAdm.ListEndOffsets(ctx, topics...)
		behind := 0
		if err == nil {
			want.Each(func(o kadm.ListedOffset) {
				if g, ok := got.Lookup(o.Topic, o.Partition); !ok || g.Offset != o.Offset {
					behind++
				}
			})
		}
		if err == nil && behind == 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatalf("after %s, %d partitions still behind (err %v)", timeout, behind, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mustClient(b *testing.B, addr string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// cpuTime is the user and system CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
