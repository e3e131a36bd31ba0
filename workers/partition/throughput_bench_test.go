package partition_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/devenv/procstat"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkThroughput copies a pre-filled 12-partition source topic into a
// destination that discards what it receives (kfake.BlackholeProduce keeps
// broker storage out of the measurement; offsets still advance), three
// ways on fresh clusters in the same run, and reports each one's rate and
// kmirror's ratio to the plain franz-go loop:
//
//   - loop: one read_committed consumer and one idempotent producer in a
//     loop, with no checkpoints, acknowledgement checks or offset map;
//     done when every record is acknowledged.
//
//   - kcat: `kcat -C | kcat -P` (librdkafka), when kcat is installed;
//     done when both exit.
//
//   - kmirror: one running instance with the server's timings, syncer and
//     __mirror_state relay; the clock starts at topics:add. "copied" is when the destination's end offsets
//     reach the source's (every record acknowledged), "lag0" when the
//     saved checkpoints do (describe shows lag 0), and "steady" counts
//     from all partitions MIRRORING to copied.
//
//     GODEBUG=madvdontneed=0 go test ./workers/partition -run '^$' -bench Throughput -benchtime=1x -count=3 -timeout 30m
//
// KMIRROR_BENCH_PROFILE=1 runs kmirror alone, for -cpuprofile and friends.
//
// KMIRROR_BENCH_CODEC (none, gzip, snappy, lz4, zstd; default none) writes
// the source with that codec, and the loop produces with it too, as a copy
// that keeps the source's codec must.
//
// Run it with GODEBUG=madvdontneed=0. On this virtual machine a page the Go
// runtime gave back with MADV_DONTNEED costs a fault to touch again, and
// each copy starts after a different amount of its memory was given back:
// a copy that faults its buffers in (60,000-100,000 faults, reported as
// *-faults) runs at a third to half the speed of one that does not, loop and
// kmirror alike. With MADV_FREE the pages stay until the kernel needs them.
func BenchmarkThroughput(b *testing.B) {
	sizes := []throughputSize{{"1KiB", 300_000, 1024}, {"100B", 1_000_000, 100}}
	clusters, err := devcluster.Start(benchClusters(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(clusters.Close)
	// The processes' first copy runs into memory they never touched, and is
	// slower whoever copies: one untimed loop copy comes first.
	measureCopy(b, clusters, sizes[0], "warm-up", copyPlain)
	for _, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			for range b.N {
				if os.Getenv("KMIRROR_BENCH_PROFILE") != "" {
					km := measureCopy(b, clusters, sz, "kmirror", copyWithKmirror)
					b.ReportMetric(km.mbps(sz), "kmirror-MB/s")
					b.ReportMetric(km.startup.Seconds()*1000, "kmirror-startup-ms")
					b.ReportMetric(km.cores, "kmirror-cores")
					continue
				}
				loop := measureCopy(b, clusters, sz, "loop", copyPlain)
				km := measureCopy(b, clusters, sz, "kmirror", copyWithKmirror)
				b.ReportMetric(loop.mbps(sz), "loop-MB/s")
				b.ReportMetric(km.mbps(sz), "kmirror-MB/s")
				b.ReportMetric(km.mbps(sz)/loop.mbps(sz), "kmirror/loop")
				b.ReportMetric(sz.mb()/km.lag0.Seconds(), "kmirror-lag0-MB/s")
				b.ReportMetric(sz.mb()/km.steady.Seconds(), "kmirror-steady-MB/s")
				b.ReportMetric(km.startup.Seconds()*1000, "kmirror-startup-ms")
				b.ReportMetric(float64(sz.records)/km.copied.Seconds(), "kmirror-records/s")
				b.ReportMetric(loop.cores, "loop-cores")
				b.ReportMetric(km.cores, "kmirror-cores")
				b.ReportMetric(float64(loop.faults), "loop-faults")
				b.ReportMetric(float64(km.faults), "kmirror-faults")
				b.ReportMetric(loop.allocMB, "loop-alloc-MB")
				b.ReportMetric(km.allocMB, "kmirror-alloc-MB")
				b.ReportMetric(float64(loop.gcs), "loop-gcs")
				b.ReportMetric(float64(km.gcs), "kmirror-gcs")
				if km.kfakeCores >= 0 {
					b.ReportMetric(loop.kfakeCores, "loop-kfake-cores")
					b.ReportMetric(km.kfakeCores, "kmirror-kfake-cores")
				}
				if km.pgCores >= 0 {
					b.ReportMetric(loop.pgCores, "loop-pg-cores")
					b.ReportMetric(km.pgCores, "kmirror-pg-cores")
				}
				if _, err := exec.LookPath("kcat"); err == nil {
					kc := measureCopy(b, clusters, sz, "kcat", copyWithKcat)
					b.ReportMetric(kc.mbps(sz), "kcat-MB/s")
				}
			}
		})
	}
}

const throughputPartitions = 12

type throughputSize struct {
	name       string
	records    int // in total, spread evenly over the partitions
	valueBytes int
}

func (sz throughputSize) mb() float64 { return float64(sz.records*sz.valueBytes) / 1e6 }

// copyTimes: copied is the end-to-end time; lag0, steady and startup only
// kmirror reports. copyCost is the meter's.
type copyTimes struct {
	copied, lag0, steady, startup time.Duration
	copyCost
}

// copyCost is what a copy's timed part cost the machine.
type copyCost struct {
	// cores is this process's CPU over the copy: the copier's, and the
	// clusters' too when they run in it (kcat's own processes not).
	cores float64
	// kfakeCores is the clusters' process's CPU over the copy, or -1 when
	// they run in this one. It shares the two cores with the copy.
	kfakeCores float64
	// faults are the process's page faults during the copy.
	faults int64
	// pgCores is Postgres's CPU over the copy (all of its processes on
	// this machine), or -1 when it runs elsewhere. It shares the two
	// cores with the copy.
	pgCores float64
	// allocMB is what the process allocated during the copy, gcs the
	// garbage collections.
	allocMB float64
	gcs     int64
}

func (c copyTimes) mbps(sz throughputSize) float64 { return sz.mb() / c.copied.Seconds() }

// benchClusters configures the clusters a run's copies share. They run in
// a child process unless KMIRROR_BENCH_CLUSTERS=inprocess, as a broker runs
// apart from its clients: in the benchmark's process, kfake's ~800 MB of
// live heap makes every garbage collection during a copy long, and the copy
// that happens to grow the heap pays its page faults
// (docs/benchmarks/history/throughput.md).
//
// KMIRROR_BENCH_SOURCE_BROKERS=N gives the source N brokers (default one,
// as devcluster starts). With one, every fetch goes to one broker and the
// copy fetches one request at a time; a real source spreads partitions over
// several, which clients fetch from at once.
func benchClusters(b *testing.B) devcluster.Config {
	cfg := devcluster.Config{BlackholeDestination: true, Process: os.Getenv("KMIRROR_BENCH_CLUSTERS") != "inprocess"}
	if v := os.Getenv("KMIRROR_BENCH_SOURCE_BROKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KMIRROR_BENCH_SOURCE_BROKERS=%q: want a count of brokers", v)
		}
		cfg.SourceBrokers = n
	}
	return cfg
}

// benchCodec is the source's codec, KMIRROR_BENCH_CODEC (default none).
func benchCodec(b *testing.B) kgo.CompressionCodec {
	switch v := os.Getenv("KMIRROR_BENCH_CODEC"); v {
	case "", "none":
		return kgo.NoCompression()
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	default:
		b.Fatalf("KMIRROR_BENCH_CODEC=%q: want none, gzip, snappy, lz4 or zstd", v)
		return kgo.NoCompression()
	}
}

// copySeq numbers the copies of a run, for their profiles' names.
var copySeq int

type copier func(b *testing.B, env *engineEnv, topic string, sz throughputSize, m *copyMeter) copyTimes

// copyMeter measures a copy's timed part only, from start to stop: the
// time, the process's CPU and page faults, the clusters' and Postgres's
// CPU, and (with KMIRROR_BENCH_PROFILE_DIR) a CPU profile. The copier's
// instance start, its waits and the checks after the copy stay outside, so
// they are not counted as the copy's cost (docs/benchmarks/history/throughput.md).
type copyMeter struct {
	b           *testing.B
	name        string
	at          time.Time
	cpu, pg     time.Duration
	faults      int64
	heap        [2]uint64 // bytes allocated, GC cycles
	clusters    *devcluster.Process
	kfake       time.Duration
	stopProfile func()
	cost        copyCost
}

// start begins the timed part and returns its start.
func (m *copyMeter) start() time.Time {
	m.b.StartTimer()
	m.stopProfile = profilePhase(m.b, m.name)
	// The other processes' CPU is read first: reading Postgres's walks
	// /proc (30-70 ms of CPU), which would count as the copy's if it came
	// after this process's CPU was read. stop reads this process's first.
	m.pg, m.kfake = postgresCPU(), kfakeCPU(m.b, m.clusters)
	m.heap, m.faults, m.cpu = heapActivity(), pageFaults(), processCPU()
	m.at = time.Now()
	return m.at
}

// stop ends the timed part and returns how long it took.
func (m *copyMeter) stop() time.Duration {
	copied := time.Since(m.at)
	m.cost.cores = (processCPU() - m.cpu).Seconds() / copied.Seconds()
	m.cost.faults = pageFaults() - m.faults
	heap := heapActivity()
	m.cost.allocMB, m.cost.gcs = float64(heap[0]-m.heap[0])/1e6, int64(heap[1]-m.heap[1])
	m.cost.pgCores, m.cost.kfakeCores = -1, -1
	if m.pg >= 0 {
		m.cost.pgCores = (postgresCPU() - m.pg).Seconds() / copied.Seconds()
	}
	if m.kfake >= 0 {
		m.cost.kfakeCores = (kfakeCPU(m.b, m.clusters) - m.kfake).Seconds() / copied.Seconds()
	}
	m.stopProfile()
	m.b.StopTimer()
	return copied
}

// measureCopy runs one copier on its own database and topic, and deletes
// the topic before returning: a copier must not run beside another's 300 MB
// of kfake data and the garbage collection it costs. The clusters are the
// benchmark's, warm, as a real deployment's brokers are.
//
// With KMIRROR_BENCH_PROFILE_DIR set, each copy's timed part is
// CPU-profiled to <size>-<name>-<n>.cpu there.
func measureCopy(b *testing.B, clusters *devcluster.Clusters, sz throughputSize, name string, copy copier) copyTimes {
	b.StopTimer()
	defer b.StartTimer()
	tb := &scopedTB{TB: b}
	defer tb.close()
	env := &engineEnv{workertest.NewEnvOn(tb, clusters)}
	copySeq++
	topic := fmt.Sprintf("bench-%d", copySeq)
	fillSource(b, env, topic, sz)
	tb.Cleanup(func() { env.DeleteTopics(topic) })
	// The fill's garbage is no copier's to collect.
	runtime.GC()
	m := &copyMeter{b: b, name: fmt.Sprintf("%s-%s-%d", sz.name, name, copySeq), clusters: clusters.Process()}
	t := copy(b, env, topic, sz, m)
	t.copyCost = m.cost
	return t
}

// pageFaults counts the process's page faults so far. On this machine (a
// virtual one) memory the Go runtime gave back to the kernel is slow to
// touch again, and a copy that faults its buffers in runs at a fraction of
// the speed of one that reuses them (docs/benchmarks/history/throughput.md).
func pageFaults() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Minflt + ru.Majflt
}

// processCPU is the CPU time this process (copier, clusters and all) has
// used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapActivity is the bytes the process has allocated and the garbage
// collections it has run so far.
func heapActivity() [2]uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return [2]uint64{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

// postgresCPU is the CPU time of the machine's Postgres processes, exited
// backends included, or -1 if none runs here.
func postgresCPU() time.Duration {
	cpu, n, err := procstat.CommandCPU("postgres")
	if err != nil || n == 0 {
		return -1
	}
	return cpu
}

// fillSource writes sz.records uncompressed records with printable,
// incompressible values (kcat splits on newlines) round-robin over the
// partitions.
func fillSource(b *testing.B, env *engineEnv, topic string, sz throughputSize) {
	b.Helper()
	env.CreateSourceTopics(throughputPartitions, topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(benchCodec(b)), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	pool := make([]byte, 1<<20+sz.valueBytes)
	for i := range pool {
		pool[i] = byte('a' + rng.IntN(26))
	}
	ctx := context.Background()
	for i := range sz.records {
		off := (i * 7919) % (1 << 20)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % throughputPartitions),
			Key: strconv.AppendInt(nil, int64(i), 10), Value: pool[off : off+sz.valueBytes]}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// destinationCopied reports whether the destination's end offsets add up to
// every record.
func destinationCopied(b *testing.B, adm *kadm.Client, topic string, sz throughputSize) bool {
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += max(o.Offset, 0) })
	return sum >= int64(sz.records)
}

// copyWithKmirror starts an instance with a mirror of no topics, then times
// topics:add to every record copied and to lag 0.
func copyWithKmirror(b *testing.B, env *engineEnv, topic string, sz throughputSize, m *copyMeter) copyTimes {
	ctx := context.Background()
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "bench",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()}}, service.WriteOpts{}); err != nil {
		b.Fatal(err)
	}
	in := startServerInstance(env.Env, "bench-1")
	// The operator adds topics to an instance that is already running: wait
	// for its lease session and its data pool's connections (opened and
	// warmed in the background at start), then past the lease loop's first
	// pass.
	workertest.WaitFor(b, 10*time.Second, "the instance's lease session and data pool", func() (bool, string) {
		var n int
		err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM instances WHERE session_epoch > 0`).Scan(&n)
		st := in.DataPool.Stat()
		open := st.TotalConns() - st.ConstructingConns()
		return err == nil && n == 1 && open == st.MaxConns(), fmt.Sprint(n, " sessions, ", open, " connections open, ", err)
	})
	time.Sleep(300 * time.Millisecond)
	// kgo caches a missing topic for MetadataMinAge (5 s by default): the
	// destination topic appears only once kmirror creates it.
	dst, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	adm := kadm.NewClient(dst)
	perPartition := int64(sz.records / throughputPartitions)
	// The console adds topics only after previewing the matches (a dry run
	// of the same call), which is also when the API first reads the mirror
	// and the source: so does the benchmark, before the clock starts.
	if _, err := env.Svc.AddTopics(ctx, "bench", service.AddTopicsInput{Topic: topic, DryRun: true}); err != nil {
		b.Fatal(err)
	}
	start := m.start()
	if _, err := env.Svc.AddTopics(ctx, "bench", service.AddTopicsInput{Topic: topic}); err != nil {
		b.Fatal(err)
	}
	// Only the destination's end offsets are polled during the copy, every
	// 5 ms; kfake answers them from memory in the clusters' process (a child
	// process unless KMIRROR_BENCH_CLUSTERS=inprocess). Polling Postgres
	// every few ms as well would take CPU from the copy on two cores.
	// Start-up and lag 0 are read from the rows afterwards.
	var t copyTimes
	deadline := start.Add(5 * time.Minute)
	for !destinationCopied(b, adm, topic, sz) {
		if time.Now().After(deadline) {
			b.Fatal("mirroring did not finish in 5m")
		}
		// Each poll costs this process CPU that counts as kmirror's: at 5 ms
		// it was 3% of a 1 KiB copy's. 20 ms is within 3% of the time.
		time.Sleep(20 * time.Millisecond)
	}
	t.copied = m.stop()
	var ps []repo.Partition
	workertest.WaitFor(b, time.Minute, "every checkpoint at the source's end", func() (bool, string) {
		var err error
		if ps, err = repo.PartitionsList(ctx, env.Pool, repo.PartitionsListParams{Mirror: "bench"}); err != nil {
			return false, err.Error()
		}
		caughtUp := 0
		for _, p := range ps {
			if p.State == service.StateMirroring && p.SrcNext != nil && *p.SrcNext >= perPartition {
				caughtUp++
			}
		}
		return caughtUp == throughputPartitions, fmt.Sprint(caughtUp, " caught up")
	})
	// Each row says when it entered MIRRORING and when its checkpoint last
	// moved (reaching the end): the last of each is start-up and lag 0.
	for _, p := range ps {
		t.startup = max(t.startup, p.StateChangedAt.Sub(start))
		t.lag0 = max(t.lag0, p.ProgressedAt.Sub(start))
	}
	t.steady = max(t.copied-t.startup, time.Millisecond)
	if os.Getenv("KMIRROR_BENCH_TRACE") != "" {
		traceStartup(b, env, start)
	}
	return t
}

// traceStartup logs each event of the copy's start-up by its time after
// topics:add (an event's time is its statement's start).
func traceStartup(b *testing.B, env *engineEnv, start time.Time) {
	rows, err := env.Pool.Query(context.Background(), `SELECT at, message FROM events WHERE at >= $1 ORDER BY at`, start)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var at time.Time
		var msg string
		if err := rows.Scan(&at, &msg); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "%7.1f ms  %s\n", float64(at.Sub(start).Microseconds())/1000, msg)
	}
}

// copyPlain is the reference: one consumer, one idempotent producer, no
// checkpoints or checks.
func copyPlain(b *testing.B, env *engineEnv, topic string, sz throughputSize, m *copyMeter) copyTimes {
	offsets := map[int32]kgo.Offset{}
	for p := range int32(throughputPartitions) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	m.start()
	src, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(benchCodec(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(dst).CreateTopic(ctx, throughputPartitions, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	copied := 0
	for copied < sz.records {
		fs := src.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			dst.Produce(ctx, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: r.Headers, Timestamp: r.Timestamp}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
			copied++
		})
	}
	if err := dst.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return copyTimes{copied: m.stop()}
}

// copyWithKcat pipes one kcat consumer into one kcat producer, the
// independent client's reference. Values are printable without newlines,
// so kcat's default delimiter keeps records whole.
func copyWithKcat(b *testing.B, env *engineEnv, topic string, sz throughputSize, m *copyMeter) copyTimes {
	env.CreateDestinationTopics(throughputPartitions, topic)
	consume := exec.Command("kcat", "-C", "-b", env.Clusters.SourceAddr(), "-t", topic, "-o", "beginning", "-e", "-q")
	produce := exec.Command("kcat", "-P", "-b", env.Clusters.DestinationAddr(), "-t", topic)
	pipe, err := consume.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	produce.Stdin = pipe
	var stderr bytes.Buffer
	consume.Stderr, produce.Stderr = &stderr, &stderr
	m.start()
	if err := produce.Start(); err != nil {
		b.Fatal(err)
	}
	if err := consume.Start(); err != nil {
		b.Fatal(err)
	}
	if err := consume.Wait(); err != nil {
		b.Fatalf("kcat -C: %v: %s", err, stderr.String())
	}
	if err := produce.Wait(); err != nil {
		b.Fatalf("kcat -P: %v: %s", err, stderr.String())
	}
	t := copyTimes{copied: m.stop()}
	dst, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	if !destinationCopied(b, kadm.NewClient(dst), topic, sz) {
		b.Fatalf("kcat copied fewer than %d records: %s", sz.records, stderr.String())
	}
	return t
}

// scopedTB runs the cleanups registered through it at close instead of at
// the end of the benchmark.
type scopedTB struct {
	testing.TB
	cleanups []func()
}

func (s *scopedTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *scopedTB) close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	runtime.GC()
}
