package partition_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/testdb"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkPartitionsAtScale: one instance, with the server's timings and
// pools and every data-plane component the server runs (engine, lease
// manager, heartbeat, notifier, metadata syncer every 30 s, outbox relay),
// mirrors one mirror of N real partitions (topics of 100 on kfake, the
// clusters in a child process so that CPU and memory are kmirror's alone).
// For each N it reports:
//
//   - settle: from the topics:add call (the instance already running)
//     until every partition is MIRRORING;
//   - RSS now and at its peak (VmRSS, VmHWM), kmirror's process only;
//   - idle cost over a window with no traffic: kmirror's CPU, kfake's
//     apart, Postgres commits, statements (pg_stat_statements, where
//     loaded) and rows written per second by table, and the busiest
//     statements;
//   - describe latency (service.ListPartitions, what GET /v1/partitions
//     reads) for one topic (100 rows), ten topics (1,000 rows) and the
//     whole mirror;
//   - then a hold: 50 records/s trickle onto random partitions while two
//     3 s Postgres stalls are injected (a lock on the session rows, then on
//     every partition row), with the leases lost or expired, renewals
//     failed, state changes, deadlocks, and how soon after the trickle
//     stops every destination end equals its source end.
//
// With several sizes it ends with a table of how each figure grows.
//
//	go test ./workers/partition -run '^$' -bench PartitionsAtScale -benchtime=1x -timeout 60m
//
// KMIRROR_BENCH_PARTITIONS (default "1000,10000"; multiples of 100) lists
// the sizes, KMIRROR_BENCH_WINDOW (default 60s) the idle window and
// KMIRROR_BENCH_HOLD (default 2m; 0 skips the hold) the hold.
func BenchmarkPartitionsAtScale(b *testing.B) {
	sizes := []int{1000, 10000}
	if v := os.Getenv("KMIRROR_BENCH_PARTITIONS"); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 100 {
				b.Fatalf("KMIRROR_BENCH_PARTITIONS=%q: want sizes of at least 100, comma-separated", v)
			}
			sizes = append(sizes, n/100*100)
		}
	}
	window := envDuration(b, "KMIRROR_BENCH_WINDOW", time.Minute)
	hold := envDuration(b, "KMIRROR_BENCH_HOLD", 2*time.Minute)
	results := map[int]scaleResult{}
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) { results[n] = runAtScale(b, n, window, hold) })
	}
	if len(results) > 1 {
		benchReport(b, "growth:\n%s", growthTable(sizes, results))
	}
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// scaleResult is one size's figures.
type scaleResult struct {
	settle       time.Duration
	settleCost   cost
	rss, peak    int64
	idle         cost
	describe     [3]time.Duration // median: one topic, ten topics, the whole mirror
	hold         cost
	holdRSS      int64
	delivery     time.Duration
	lost, failed int64
	stop         time.Duration // graceful stop of the instance
}

func runAtScale(b *testing.B, total int, window, hold time.Duration) scaleResult {
	const perTopic = 100
	topics := total / perTopic
	ctx := context.Background()
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{Process: true})}
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%03d", i)
	}
	env.CreateSourceTopics(perTopic, names...)
	meter := newCostMeter(b, env.Env)
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "big",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()}}, service.WriteOpts{}); err != nil {
		b.Fatal(err)
	}
	var res scaleResult

	// The instance runs first, with nothing to do; the clock starts at the
	// topics:add call, as an operator would see it.
	in := env.StartInstanceOpts("i1", workertest.InstanceOpts{ProductionTimings: true, LeaseSignals: true,
		Sync: true, SyncInterval: 30 * time.Second})
	relay := startRelay(env.Env, in)
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
		if err := meter.pool.QueryRow(ctx, `SELECT count(*) FROM mirror_partitions
			WHERE mirror = 'big' AND state = $1 AND lease_owner IS NOT NULL`, string(service.StateMirroring)).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}

	b.ResetTimer()
	settling := meter.start()
	pool0 := in.DataPool.Stat()
	stopProfile := profilePhase(b, fmt.Sprintf("settle-%d", total))
	start := time.Now()
	if _, err := env.Svc.AddTopics(ctx, "big", service.AddTopicsInput{Topic: `scale-\d+`}); err != nil {
		b.Fatal(err)
	}
	added := time.Since(start)
	goroutinesAt := start.Add(20 * time.Second)
	for n := 0; n < total; n = countMirroring() {
		if !goroutinesAt.IsZero() && time.Now().After(goroutinesAt) {
			goroutineProfile(b, fmt.Sprintf("settle-%d-goroutines.txt", total))
			goroutinesAt = time.Time{}
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("only %d of %d partitions MIRRORING after 10m", n, total)
		}
		time.Sleep(250 * time.Millisecond)
	}
	res.settle = time.Since(start)
	stopProfile()
	res.settleCost = settling()
	pool1 := in.DataPool.Stat()
	settleMem := selfMemory(b)
	var lastEvent int64
	if err := meter.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&lastEvent); err != nil {
		b.Fatal(err)
	}
	lostAtSettle := lost.Load()
	benchReport(b, "topics:add took %s; all %d partitions MIRRORING %s after it (%d leases lost on the way); RSS %.0f MiB, peak %.0f MiB\n"+
		"while settling: %s\ndata pool (%d connections): %d acquires, %d of them waited, %s waiting in all\nbusiest statements while settling:\n%s",
		added.Round(time.Millisecond), total, res.settle.Round(time.Millisecond), lostAtSettle, mib(settleMem.RSS), mib(settleMem.Peak),
		res.settleCost, pool1.MaxConns(), pool1.AcquireCount()-pool0.AcquireCount(), pool1.EmptyAcquireCount()-pool0.EmptyAcquireCount(),
		(pool1.EmptyAcquireWaitTime() - pool0.EmptyAcquireWaitTime()).Round(time.Second), res.settleCost.statementsReport(20))

	// Idle: let start-up work (first checkpoints, end offsets, the first
	// sync pass, the relay's checkpoint records) pass, then measure.
	time.Sleep(20 * time.Second)
	stopProfile = profilePhase(b, fmt.Sprintf("idle-%d", total))
	res.idle = meter.measure(window)
	stopProfile()
	mem := selfMemory(b)
	res.rss, res.peak = mem.RSS, mem.Peak
	benchReport(b, "idle %s: %s; RSS %.0f MiB, peak %.0f MiB\nbusiest statements:\n%s",
		window, res.idle, mib(mem.RSS), mib(mem.Peak), res.idle.statementsReport(15))

	// Describe.
	// Over a pool of its own, as the API has.
	api, err := service.NewControl(service.Config{Pool: meter.pool, Catalog: service.KafkaCatalog(3 * time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	res.describe = [3]time.Duration{
		describeLatency(b, api, "scale-000"),
		describeLatency(b, api, `scale-00\d`),
		describeLatency(b, api, ""),
	}
	benchReport(b, "describe (median of 9): one topic (100 rows) %s, ten topics (1,000 rows) %s, the whole mirror (%d rows) %s",
		res.describe[0].Round(10*time.Microsecond), res.describe[1].Round(10*time.Microsecond), total,
		res.describe[2].Round(10*time.Microsecond))

	if hold > 0 {
		holdAtScale(b, env, names, perTopic, hold, meter, &res)
	}
	b.StopTimer()

	// A graceful stop: every worker settles and checkpoints, every lease
	// is handed back.
	stopStart := time.Now()
	relay.Stop()
	in.Stop()
	res.stop = time.Since(stopStart)

	var changes, deadlocks int64
	if err := meter.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE id > $1 AND kind = $2`,
		lastEvent, service.EventPartitionState).Scan(&changes); err != nil {
		b.Fatal(err)
	}
	if err := meter.pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&deadlocks); err != nil {
		b.Fatal(err)
	}
	res.lost = lost.Load()
	res.failed = renewFailed.Load()

	b.ReportMetric(res.settle.Seconds(), "settle-s")
	b.ReportMetric(mib(res.rss), "rss-MiB")
	b.ReportMetric(mib(res.peak), "peak-rss-MiB")
	b.ReportMetric(res.idle.kmirror, "idle-cores")
	if res.idle.kfake >= 0 {
		b.ReportMetric(res.idle.kfake, "idle-kfake-cores")
	}
	b.ReportMetric(res.idle.pg.Commits, "idle-commits/s")
	if res.idle.pg.Statements != nil {
		b.ReportMetric(res.idle.pg.TotalStatements(), "idle-statements/s")
	}
	b.ReportMetric(res.idle.pg.TotalRows(), "idle-rows/s")
	b.ReportMetric(float64(res.describe[1].Microseconds())/1000, "describe-1000-ms")
	b.ReportMetric(res.stop.Seconds(), "stop-s")
	b.ReportMetric(float64(lost.Load()), "leases-lost")
	b.ReportMetric(float64(expired.Load()), "leases-expired")
	b.ReportMetric(float64(renewFailed.Load()), "renewals-failed")
	b.ReportMetric(float64(changes), "state-changes")
	b.ReportMetric(float64(deadlocks), "deadlocks")
	benchReport(b, "graceful stop of the instance: %s", res.stop.Round(time.Millisecond))
	benchReport(b, "%d leases lost (%d while settling), %d expired, %d renewals failed, %d state changes after settling, %d deadlocks",
		lost.Load(), lostAtSettle, expired.Load(), renewFailed.Load(), changes, deadlocks)
	return res
}

// holdAtScale trickles 50 records a second onto random partitions for
// hold, injecting a 3 s lock of the session rows a third of the way in and
// one of every partition row half-way through the rest; then it waits until
// every record is on the destination.
func holdAtScale(b *testing.B, env *engineEnv, names []string, perTopic int32,
	hold time.Duration, meter *costMeter, res *scaleResult) {
	ctx := context.Background()
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
				r := &kgo.Record{Topic: names[rand.IntN(len(names))], Partition: rand.Int32N(perTopic), Value: []byte("trickle")}
				if err := src.ProduceSync(trickleCtx, r).FirstErr(); err == nil {
					produced.Add(1)
				}
			}
		}
	})
	done := meter.start()
	stopProfile := profilePhase(b, fmt.Sprintf("hold-%d", len(names)*int(perTopic)))
	holdStart := time.Now()
	holdUntil := holdStart.Add(hold)
	stall := func(what, sql string) {
		testdb.Stall(b, meter.pool, sql, 3*time.Second)
		benchReport(b, "injected a 3s %s at +%s", what, time.Since(holdStart).Round(time.Second))
	}
	time.Sleep(time.Until(holdUntil) / 3)
	stall("lock of the session rows", `SELECT 1 FROM instances FOR UPDATE`)
	time.Sleep(time.Until(holdUntil) / 2)
	stall("lock of every partition row", `SELECT 1 FROM mirror_partitions FOR UPDATE`)
	time.Sleep(time.Until(holdUntil))
	stopProfile()
	res.hold = done()
	res.holdRSS = selfMemory(b).RSS
	stopTrickle()
	trickle.Wait()
	stopped := time.Now()
	res.delivery = waitAllDelivered(b, env, names, 2*time.Minute).Sub(stopped)
	b.ReportMetric(res.hold.kmirror, "hold-cores")
	b.ReportMetric(res.delivery.Seconds(), "delivery-s")
	benchReport(b, "hold %s, 50 records/s and two 3s stalls: %s; %d records delivered %s after the trickle stopped",
		hold, res.hold, produced.Load(), res.delivery.Round(time.Millisecond))
}

// describeLatency is the median of nine describes of mirror "big" whose
// topic matches pattern ("" all).
func describeLatency(b *testing.B, api *service.Control, pattern string) time.Duration {
	ctx := context.Background()
	var ds []time.Duration
	for range 9 {
		t0 := time.Now()
		rows, err := api.ListPartitions(ctx, service.PartitionFilter{Mirror: "big", Topic: pattern})
		if err != nil || len(rows) == 0 {
			b.Fatalf("describe %q: %d rows, %v", pattern, len(rows), err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// growthTable is a markdown table of each size's figures and, in its last
// row, how each grew from the first size to the last against the
// partitions' own growth.
func growthTable(sizes []int, rs map[int]scaleResult) string {
	var b strings.Builder
	b.WriteString("| partitions | settle | settle cores kmirror / kfake | RSS / peak (MiB) | idle kmirror cores | idle kfake cores | commits/s | statements/s | rows written/s | describe 1 topic / 1,000 rows / all (ms) | hold cores | graceful stop |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	for _, n := range sizes {
		r := rs[n]
		fmt.Fprintf(&b, "| %d | %.1f s | %.2f / %.2f | %.0f / %.0f | %.3f | %.3f | %.1f | %.1f | %.1f | %s / %s / %s | %.3f | %.1f s |\n",
			n, r.settle.Seconds(), r.settleCost.kmirror, r.settleCost.kfake, mib(r.rss), mib(r.peak), r.idle.kmirror, r.idle.kfake, r.idle.pg.Commits,
			r.idle.pg.TotalStatements(), r.idle.pg.TotalRows(), ms(r.describe[0]), ms(r.describe[1]), ms(r.describe[2]), r.hold.kmirror, r.stop.Seconds())
	}
	first, last := rs[sizes[0]], rs[sizes[len(sizes)-1]]
	x := func(a, z float64) string {
		if a <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f×", z/a)
	}
	fmt.Fprintf(&b, "| growth (%s partitions) | %s | | %s / %s | %s | %s | %s | %s | %s | %s / %s / %s | %s | %s |\n",
		x(float64(sizes[0]), float64(sizes[len(sizes)-1])),
		x(first.settle.Seconds(), last.settle.Seconds()), x(mib(first.rss), mib(last.rss)), x(mib(first.peak), mib(last.peak)),
		x(first.idle.kmirror, last.idle.kmirror), x(first.idle.kfake, last.idle.kfake),
		x(first.idle.pg.Commits, last.idle.pg.Commits), x(first.idle.pg.TotalStatements(), last.idle.pg.TotalStatements()),
		x(first.idle.pg.TotalRows(), last.idle.pg.TotalRows()),
		x(first.describe[0].Seconds(), last.describe[0].Seconds()), x(first.describe[1].Seconds(), last.describe[1].Seconds()),
		x(first.describe[2].Seconds(), last.describe[2].Seconds()), x(first.hold.kmirror, last.hold.kmirror), x(first.stop.Seconds(), last.stop.Seconds()))
	return b.String()
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
