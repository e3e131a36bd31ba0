package partition_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkIdleCost: what one instance costs when there is little or
// nothing to do. Ten mirrors of 100 partitions each (one topic of 100
// partitions per mirror) on one instance with the server's timings, all
// MIRRORING; then kmirror's CPU (the kfake clusters run in a child process
// and are reported apart) and Postgres's commits, statements and rows
// written per second are measured over a window, with no traffic ("idle")
// and with 1% of the partitions receiving one record a second
// ("trickle"). Targets (docs/benchmarks.md): 2% of a core idle, 5% with
// the trickle.
//
//	go test ./workers/partition -run '^$' -bench IdleCost -benchtime=1x -timeout 20m
//
// KMIRROR_BENCH_WINDOW (default 60s) sets each measuring window;
// KMIRROR_BENCH_PROFILE_DIR writes CPU profiles of both windows.
func BenchmarkIdleCost(b *testing.B) {
	window := time.Minute
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_BENCH_WINDOW")); err == nil {
		window = d
	}
	const mirrors, perTopic = 10, 100
	ctx := context.Background()
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{Process: true})}
	for i := range mirrors {
		topic := fmt.Sprintf("idle-%02d", i)
		env.CreateSourceTopics(perTopic, topic)
		env.CreateMirror(fmt.Sprintf("m%02d", i), topic)
	}
	meter := newCostMeter(b, env.Env)
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

	stopProfile := profilePhase(b, "idle")
	idle := meter.measure(window)
	stopProfile()
	benchReport(b, "idle, %d partitions: %s\nbusiest statements:\n%s", total, idle, idle.statementsReport(10))

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
	stopProfile = profilePhase(b, "trickle")
	trickle := meter.measure(window)
	stopProfile()
	stop()
	wg.Wait()
	b.StopTimer()
	benchReport(b, "trickle, %d partitions at 1 record/s: %s (the trickle's producer included)\nbusiest statements:\n%s",
		total/100, trickle, trickle.statementsReport(10))

	for _, w := range []struct {
		name string
		c    cost
	}{{"idle", idle}, {"trickle", trickle}} {
		b.ReportMetric(w.c.kmirror, w.name+"-cores")
		b.ReportMetric(w.c.kfake, w.name+"-kfake-cores")
		b.ReportMetric(w.c.pg.Commits, w.name+"-commits/s")
		if w.c.pg.Statements != nil {
			b.ReportMetric(w.c.pg.TotalStatements(), w.name+"-statements/s")
		}
		b.ReportMetric(w.c.pg.TotalRows(), w.name+"-rows/s")
	}
}
