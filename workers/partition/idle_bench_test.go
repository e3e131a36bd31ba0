package partition_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkIdleCost: what one instance costs when there is little or
// nothing to do. Ten mirrors of 100 partitions each (one topic of 100
// partitions per mirror) on one instance with the server's timings, all
// MIRRORING; then the process's CPU and Postgres's commits and row writes
// per second are measured over a window, with no traffic ("idle") and with
// 1% of the partitions receiving one record a second ("trickle").
//
//	go test ./workers/partition -run '^$' -bench IdleCost -benchtime=1x -timeout 20m
//
// KMIRROR_BENCH_WINDOW (default 60s) sets each measuring window. The CPU
// includes the in-process kfake clusters answering the idle fetches, so
// it is an upper bound on kmirror's own.
func BenchmarkIdleCost(b *testing.B) {
	window := time.Minute
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_BENCH_WINDOW")); err == nil {
		window = d
	}
	const mirrors, perTopic = 10, 100
	ctx := context.Background()
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{})}
	for i := range mirrors {
		topic := fmt.Sprintf("idle-%02d", i)
		if err := env.Clusters.Source.CreateTopic(topic, perTopic, nil); err != nil {
			b.Fatal(err)
		}
		env.CreateMirror(fmt.Sprintf("m%02d", i), topic)
	}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{ProductionTimings: true})
	total := mirrors * perTopic
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var n int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM mirror_partitions WHERE state = $1`,
			string(service.StateMirroring)).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n == total {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d partitions MIRRORING after 5m", n, total)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Let start-up work (first checkpoints, end offsets, syncs) settle.
	time.Sleep(15 * time.Second)
	b.ResetTimer()

	idle := measureCost(b, env, window)
	b.Logf("idle, %d partitions: %.3f cores, %.1f commits/s, %.1f rows written/s", total, idle.cores, idle.commits, idle.rows)

	// The trickle: 1% of the partitions get a record a second.
	src, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
			for p := range int32(total / 100) {
				src.Produce(tctx, &kgo.Record{Topic: fmt.Sprintf("idle-%02d", p%mirrors), Partition: p, Value: []byte("t")}, nil)
			}
		}
	})
	time.Sleep(5 * time.Second)
	trickle := measureCost(b, env, window)
	stop()
	wg.Wait()
	b.StopTimer()
	b.Logf("trickle, %d partitions at 1 record/s: %.3f cores, %.1f commits/s, %.1f rows written/s", total/100, trickle.cores, trickle.commits, trickle.rows)

	b.ReportMetric(idle.cores, "idle-cores")
	b.ReportMetric(idle.commits, "idle-commits/s")
	b.ReportMetric(idle.rows, "idle-rows/s")
	b.ReportMetric(trickle.cores, "trickle-cores")
	b.ReportMetric(trickle.commits, "trickle-commits/s")
	b.ReportMetric(trickle.rows, "trickle-rows/s")
}

type cost struct{ cores, commits, rows float64 }

// measureCost samples the process's CPU and the database's commits and row
// writes (inserted + updated + deleted) over window.
func measureCost(b *testing.B, env *engineEnv, window time.Duration) cost {
	b.Helper()
	ctx := context.Background()
	stats := func() (commits, rows int64) {
		if err := env.Pool.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted
			FROM pg_stat_database WHERE datname = current_database()`).Scan(&commits, &rows); err != nil {
			b.Fatal(err)
		}
		return commits, rows
	}
	// Backends report to pg_stat_database at most once a second, and an
	// idle one within 10 s: over a window of a minute that blurs a little.
	// This connection's own statements are flushed at once.
	flush := func() {
		if _, err := env.Pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Logf("pg_stat_force_next_flush: %v", err)
		}
	}
	flush()
	c0, r0 := stats()
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(window)
	cpu1, t1 := cpuTime(), time.Now()
	flush()
	c1, r1 := stats()
	secs := t1.Sub(t0).Seconds()
	// Subtract this function's own two statement rounds.
	return cost{cores: (cpu1 - cpu0).Seconds() / secs, commits: float64(c1-c0-4) / secs, rows: float64(r1-r0) / secs}
}
