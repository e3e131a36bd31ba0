package partition_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkPausedLagInTime: what lag in time costs the offsets refresh,
// where it reads a record per lagging partition that is not mirroring. Ten
// mirrors of 100 partitions each on one instance with the server's timings
// are mirrored, paused, then given one record per partition: every
// partition lags, and the refresh must read the record at each one's
// src_next once (grouped per mirror, record_reads.go). Reported: how long
// until every partition's lag_ms is known; then kmirror's CPU and
// Postgres's statements and rows per second over a window with 1% of the
// partitions receiving a record a second ("trickle"), where the source
// ends move but no src_next does, so nothing is read again.
//
//	go test ./workers/partition -run '^$' -bench PausedLagInTime -benchtime=1x -timeout 20m
//
// KMIRROR_BENCH_WINDOW (default 60s) sets the measuring window;
// KMIRROR_BENCH_PARTITIONS (default 1000) the partitions, over ten mirrors.
func BenchmarkPausedLagInTime(b *testing.B) {
	window := time.Minute
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_BENCH_WINDOW")); err == nil {
		window = d
	}
	const mirrors = 10
	perTopic := 100
	if n, err := strconv.Atoi(os.Getenv("KMIRROR_BENCH_PARTITIONS")); err == nil && n >= mirrors {
		perTopic = n / mirrors
	}
	total := mirrors * perTopic
	ctx := context.Background()
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{Process: true})}
	for i := range mirrors {
		topic := fmt.Sprintf("paused-%02d", i)
		env.CreateSourceTopics(int32(perTopic), topic)
		env.CreateMirror(fmt.Sprintf("m%02d", i), topic)
	}
	meter := newCostMeter(b, env.Env)
	env.StartInstanceOpts("i1", workertest.InstanceOpts{ProductionTimings: true})
	count := func(cond string, args ...any) int {
		var n int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM mirror_partitions WHERE `+cond, args...).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	waitAll := func(what, cond string, timeout time.Duration, args ...any) time.Duration {
		start := time.Now()
		for count(cond, args...) != total {
			if time.Since(start) > timeout {
				b.Fatalf("%s: only %d of %d after %s", what, count(cond, args...), total, timeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitAll("MIRRORING", "state = $1", 5*time.Minute, string(service.StateMirroring))
	for i := range mirrors {
		if _, err := env.Svc.PauseTopics(ctx, fmt.Sprintf("m%02d", i), fmt.Sprintf("paused-%02d", i)); err != nil {
			b.Fatal(err)
		}
	}
	waitAll("PAUSED", "state = $1", 2*time.Minute, string(service.StatePaused))

	src, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	var rs []*kgo.Record
	for i := range mirrors {
		for p := range int32(perTopic) {
			rs = append(rs, &kgo.Record{Topic: fmt.Sprintf("paused-%02d", i), Partition: p, Value: []byte("late")})
		}
	}
	if err := src.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	// What the reads cost: the 10 s after the records were produced,
	// against the same window of the code before lag in time (where
	// only the ends' refresh runs in it).
	const burstWindow = 10 * time.Second
	burstStart := time.Now()
	burst := meter.start()
	known := waitAll("lag_ms known", "oldest_uncopied_src = src_next AND oldest_uncopied_at IS NOT NULL", 2*time.Minute)
	time.Sleep(time.Until(burstStart.Add(burstWindow)))
	bc := burst()
	benchReport(b, "%d paused partitions, each one record behind: every lag_ms known %s after the records were produced; the %s from then: %.3f CPU-seconds, %s",
		total, known.Round(time.Millisecond), burstWindow, bc.kmirror*burstWindow.Seconds(), bc)

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
				src.Produce(tctx, &kgo.Record{Topic: fmt.Sprintf("paused-%02d", p%mirrors), Partition: p, Value: []byte("t")}, nil)
			}
		}
	})
	time.Sleep(5 * time.Second)
	trickle := meter.measure(window)
	stop()
	wg.Wait()
	b.StopTimer()
	benchReport(b, "trickle on %d of %d paused partitions at 1 record/s: %s (the trickle's producer included)\nbusiest statements:\n%s",
		total/100, total, trickle, trickle.statementsReport(10))
	rows, err := env.Pool.Query(ctx, `SELECT kind, count(*), min(message) FROM events WHERE at > now() - $1::interval GROUP BY 1`,
		fmt.Sprintf("%d seconds", int(window.Seconds())))
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var kind, msg string
		var n int
		if err := rows.Scan(&kind, &n, &msg); err != nil {
			b.Fatal(err)
		}
		benchReport(b, "events in the window: %d %s (%s)", n, kind, msg)
	}
	rows.Close()
	b.ReportMetric(known.Seconds(), "known-s")
	b.ReportMetric(bc.kmirror*burstWindow.Seconds(), "burst-cpu-s")
	b.ReportMetric(trickle.kmirror, "trickle-cores")
	b.ReportMetric(trickle.pg.Commits, "trickle-commits/s")
	if trickle.pg.Statements != nil {
		b.ReportMetric(trickle.pg.TotalStatements(), "trickle-statements/s")
	}
	b.ReportMetric(trickle.pg.TotalRows(), "trickle-rows/s")
}
