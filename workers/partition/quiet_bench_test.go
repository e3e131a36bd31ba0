package partition_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
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
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkQuietPartitions: issue 28 item 4, "quiet partitions cost almost
// nothing". One instance with the server's timings mirrors N partitions
// (topics of 100) and a trickle of R small records a second goes to random
// partitions; then the instance is stopped and a plain franz-go copy loop
// (one read_committed consumer assigned the same N partitions from their
// ends, one producer, writing to destination topics of its own) is measured
// the same way in the same run. For each copier it reports the process's
// CPU over a window with no traffic and over a window with the trickle, and
// the latency of each trickle record from its send to its arrival at a
// consumer of the destination (p50, p99, max). Target: kmirror ≤ 0.1 core
// with the trickle at 10,000 partitions and 50 records/s, and no more than
// the loop; trickle p99 < 1 s.
//
// The copier is alone in this process: the kfake clusters run in one child
// (devcluster.Config{Process: true}, reported apart), and the trickle's
// producer and the destination consumer that times it in another, a
// re-execution of this binary as TestQuietTrickleProcess.
//
//	go test ./workers/partition -run '^$' -bench QuietPartitions -benchtime=1x -timeout 30m
//
// KMIRROR_BENCH_PARTITIONS (default 10000, a multiple of 100), KMIRROR_BENCH_RATE
// (records a second, default 50) and KMIRROR_BENCH_WINDOW (default 30s, each
// of the four windows). KMIRROR_BENCH_PROFILE_DIR writes CPU, block and mutex
// profiles of each window (quiet-kmirror-idle, quiet-kmirror-trickle,
// quiet-loop-idle, quiet-loop-trickle); the block and mutex sampling
// profilePhase turns on costs CPU of its own, so take the cores from a run
// without it.
func BenchmarkQuietPartitions(b *testing.B) {
	const perTopic = 100
	total := envInt(b, "KMIRROR_BENCH_PARTITIONS", 10000) / perTopic * perTopic
	rate := envInt(b, "KMIRROR_BENCH_RATE", 50)
	window := envDuration(b, "KMIRROR_BENCH_WINDOW", 30*time.Second)
	if total < perTopic || rate < 1 {
		b.Fatalf("want at least %d partitions and 1 record a second, have %d and %d", perTopic, total, rate)
	}
	ctx := context.Background()
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{Process: true})}
	names := make([]string, total/perTopic)
	loopNames := make([]string, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("quiet-%03d", i)
		loopNames[i] = quietLoopPrefix + names[i]
	}
	env.CreateSourceTopics(perTopic, names...)
	env.CreateDestinationTopics(perTopic, loopNames...)
	meter := newCostMeter(b, env.Env)
	load0 := loadAverage()

	env.CreateMirror("quiet", `quiet-\d+`)
	in := env.StartInstanceOpts("i1", workertest.InstanceOpts{ProductionTimings: true})
	start := time.Now()
	workertest.WaitFor(b, 10*time.Minute, fmt.Sprintf("all %d partitions MIRRORING", total), func() (bool, string) {
		var n int
		if err := meter.pool.QueryRow(ctx, `SELECT count(*) FROM mirror_partitions
			WHERE mirror = 'quiet' AND state = $1 AND lease_owner IS NOT NULL`, string(service.StateMirroring)).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == total, fmt.Sprint(n, " MIRRORING")
	})
	settled := time.Since(start)
	// Let start-up work (first checkpoints, end offsets, lease passes) pass.
	time.Sleep(20 * time.Second)
	b.ResetTimer()

	trickle := quietTrickleConfig{Source: env.Clusters.SourceAddr(), Destination: env.Clusters.DestinationAddr(),
		Topics: names, Partitions: perTopic, Rate: rate, Window: window}
	stopProfile := profilePhase(b, "quiet-kmirror-idle")
	kmIdle := meter.measure(window)
	stopProfile()
	kmTrickle, kmLat := measureQuietTrickle(b, meter, trickle, "quiet-kmirror-trickle")
	benchReport(b, "kmirror, %d partitions MIRRORING %s after start:\nidle: %s\ntrickle %d records/s: %s\n"+
		"trickle latency: %s\nbusiest statements with the trickle:\n%s",
		total, settled.Round(time.Second), kmIdle, rate, kmTrickle, kmLat, kmTrickle.statementsReport(8))

	// The reference, in this process once kmirror has stopped and its
	// garbage is collected.
	b.StopTimer()
	in.Stop()
	runtime.GC()
	debug.FreeOSMemory()
	loopCtx, stopLoop := context.WithCancel(ctx)
	var loop sync.WaitGroup
	var loopCopied atomic.Int64
	loop.Go(func() { quietCopyLoop(b, loopCtx, env, names, &loopCopied) })
	// Let the loop's clients list the ends and open their fetch sessions.
	time.Sleep(10 * time.Second)
	b.StartTimer()
	stopProfile = profilePhase(b, "quiet-loop-idle")
	loopIdle := meter.measure(window)
	stopProfile()
	trickle.DestinationPrefix = quietLoopPrefix
	loopTrickle, loopLat := measureQuietTrickle(b, meter, trickle, "quiet-loop-trickle")
	b.StopTimer()
	stopLoop()
	loop.Wait()
	load1 := loadAverage()
	benchReport(b, "plain franz-go loop, the same %d partitions:\nidle: %s\ntrickle %d records/s: %s\ntrickle latency: %s\n"+
		"(%d records copied in all)\nload average before %s, after %s",
		total, loopIdle, rate, loopTrickle, loopLat, loopCopied.Load(), load0, load1)

	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(kmTrickle.kmirror, "kmirror-cores")
	b.ReportMetric(loopTrickle.kmirror, "loop-cores")
	b.ReportMetric(kmTrickle.kmirror/loopTrickle.kmirror, "kmirror/loop")
	b.ReportMetric(kmIdle.kmirror, "kmirror-idle-cores")
	b.ReportMetric(loopIdle.kmirror, "loop-idle-cores")
	b.ReportMetric(kmTrickle.kfake, "kmirror-kfake-cores")
	b.ReportMetric(loopTrickle.kfake, "loop-kfake-cores")
	b.ReportMetric(ms(kmLat.P50), "kmirror-p50-ms")
	b.ReportMetric(ms(kmLat.P99), "kmirror-p99-ms")
	b.ReportMetric(ms(kmLat.Max), "kmirror-max-ms")
	b.ReportMetric(ms(loopLat.P50), "loop-p50-ms")
	b.ReportMetric(ms(loopLat.P99), "loop-p99-ms")
	b.ReportMetric(ms(loopLat.Max), "loop-max-ms")
}

// quietLoopPrefix names the copy loop's destination topics, so its offsets
// do not meet kmirror's copies of the same source partitions.
const quietLoopPrefix = "loop-"

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// quietCopyLoop is the reference copier: one consumer assigned every
// partition of topics from its end, read_committed and fetching with
// kmirror's 500 ms wait, and one idempotent producer without linger (as
// kmirror's), copying each record to quietLoopPrefix+topic until ctx ends.
func quietCopyLoop(b *testing.B, ctx context.Context, env *engineEnv, topics []string, copied *atomic.Int64) {
	assign := map[string]map[int32]kgo.Offset{}
	adm := kadm.NewClient(mustClient(b, env.Clusters.SourceAddr()))
	ends, err := adm.ListEndOffsets(ctx, topics...)
	adm.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		b.Error(err)
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		if assign[o.Topic] == nil {
			assign[o.Topic] = map[int32]kgo.Offset{}
		}
		assign[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset)
	})
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		b.Error(err)
		return
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		b.Error(err)
		return
	}
	defer prod.Close()
	for ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				b.Errorf("loop fetch %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			prod.Produce(ctx, &kgo.Record{Topic: quietLoopPrefix + r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: r.Headers, Timestamp: r.Timestamp}, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, context.Canceled) {
					b.Errorf("loop produce: %v", err)
				}
			})
			copied.Add(1)
		})
	}
}

// quietTrickleEnv marks the trickle's child process; its value is the
// child's quietTrickleConfig in JSON.
const quietTrickleEnv = "KMIRROR_BENCH_QUIET_TRICKLE"

// quietTrickleConfig is what the trickle's child does: produce Rate records
// a second to random partitions of Topics on Source for Window, and time
// each one's arrival on DestinationPrefix+topic on Destination.
type quietTrickleConfig struct {
	Source, Destination string
	Topics              []string
	DestinationPrefix   string
	Partitions          int32
	Rate                int
	Window              time.Duration
}

// quietLatencies is the child's answer.
type quietLatencies struct {
	Sent, Arrived int
	P50, P90, P99 time.Duration
	Max           time.Duration
	OverSecond    int // records that took longer than 1 s
}

func (l quietLatencies) String() string {
	return fmt.Sprintf("%d records sent (%d arrived): p50 %s, p90 %s, p99 %s, max %s; %d over 1 s", l.Sent, l.Arrived,
		l.P50.Round(100*time.Microsecond), l.P90.Round(100*time.Microsecond), l.P99.Round(100*time.Microsecond),
		l.Max.Round(100*time.Microsecond), l.OverSecond)
}

// The lines the child and the parent exchange: the child says ready once
// its clients are warm, the parent starts its meter and says go, the child
// says how many it sent at the end of the window, then its latencies once
// every record arrived.
const (
	quietReady  = "quiet-trickle ready"
	quietSent   = "quiet-trickle sent "
	quietResult = "quiet-trickle result "
)

// measureQuietTrickle runs the trickle in its child, and measures this
// process (the copier) from just before the trickle's first record to the
// end of its window, with a CPU profile named profile where asked.
func measureQuietTrickle(b *testing.B, meter *costMeter, cfg quietTrickleConfig, profile string) (cost, quietLatencies) {
	b.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestQuietTrickleProcess$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), quietTrickleEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "quiet-trickle ") {
				lines <- l
			}
		}
	}()
	next := func(what string, timeout time.Duration) string {
		select {
		case l, ok := <-lines:
			if !ok {
				b.Fatalf("the trickle's process ended before %s", what)
			}
			return l
		case <-time.After(timeout):
			_ = cmd.Process.Kill()
			b.Fatalf("the trickle's process: no %s after %s", what, timeout)
		}
		return ""
	}
	if l := next("ready", 2*time.Minute); l != quietReady {
		b.Fatalf("the trickle's process said %q, want %q", l, quietReady)
	}
	done := meter.start()
	stopProfile := profilePhase(b, profile)
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		b.Fatal(err)
	}
	l := next("end of the window", cfg.Window+time.Minute)
	stopProfile()
	c := done()
	if !strings.HasPrefix(l, quietSent) {
		b.Fatalf("the trickle's process said %q, want %q", l, quietSent+"N")
	}
	l = next("result", 3*time.Minute)
	var lat quietLatencies
	if err := json.Unmarshal([]byte(strings.TrimPrefix(l, quietResult)), &lat); err != nil {
		b.Fatalf("the trickle's result %q: %v", l, err)
	}
	return c, lat
}

// TestQuietTrickleProcess is BenchmarkQuietPartitions's trickle, run in a
// process of its own so that its producer and consumer are not counted as
// the copier's CPU. Anywhere else it skips.
func TestQuietTrickleProcess(t *testing.T) {
	v := os.Getenv(quietTrickleEnv)
	if v == "" {
		t.Skip("BenchmarkQuietPartitions's trickle process; it runs this itself")
	}
	var cfg quietTrickleConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := runQuietTrickle(cfg, os.Stdin, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// quietRecordBytes is a trickle record's value: its send time (Unix
// nanoseconds) then padding.
const quietRecordBytes = 100

func runQuietTrickle(cfg quietTrickleConfig, stdin io.Reader, stdout io.Writer) error {
	ctx := context.Background()
	dstTopics := make([]string, len(cfg.Topics))
	for i, t := range cfg.Topics {
		dstTopics[i] = cfg.DestinationPrefix + t
	}
	// The consumer starts at the destination's ends, listed before
	// anything is sent, so no record is missed.
	admCl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Destination))
	if err != nil {
		return err
	}
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, dstTopics...)
	admCl.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("destination ends: %w", err)
	}
	assign := map[string]map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if assign[o.Topic] == nil {
			assign[o.Topic] = map[int32]kgo.Offset{}
		}
		assign[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset)
	})
	cons, err := kgo.NewClient(kgo.SeedBrokers(cfg.Destination), kgo.ConsumePartitions(assign),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.Source), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer prod.Close()

	var mu sync.Mutex
	var lat []time.Duration
	warm := 0
	readCtx, stopReading := context.WithCancel(ctx)
	var reading sync.WaitGroup
	reading.Go(func() {
		for readCtx.Err() == nil {
			fs := cons.PollFetches(readCtx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) == quietRecordBytes {
					lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
				} else {
					warm++
				}
			})
			mu.Unlock()
		}
	})
	defer reading.Wait()
	defer stopReading()
	waitFor := func(what string, timeout time.Duration, done func() bool) error {
		deadline := time.Now().Add(timeout)
		for {
			mu.Lock()
			ok := done()
			mu.Unlock()
			if ok {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: not after %s", what, timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Warm both clients: one record to each topic's partition 0, and each
	// seen on the destination, which also shows the copier is copying.
	for _, t := range cfg.Topics {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: t, Partition: 0, Value: []byte("warm-up")}).FirstErr(); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := waitFor("every warm-up record on the destination", 2*time.Minute,
		func() bool { return warm >= len(cfg.Topics) }); err != nil {
		return err
	}
	fmt.Fprintln(stdout, quietReady)
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}

	var failed atomic.Int64
	tick := time.NewTicker(time.Second / time.Duration(cfg.Rate))
	end := time.Now().Add(cfg.Window)
	sent := 0
	for time.Now().Before(end) {
		<-tick.C
		v := make([]byte, quietRecordBytes)
		binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		r := &kgo.Record{Topic: cfg.Topics[rand.IntN(len(cfg.Topics))], Partition: rand.Int32N(cfg.Partitions), Value: v}
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
		sent++
	}
	tick.Stop()
	fmt.Fprintf(stdout, "%s%d\n", quietSent, sent)
	if err := prod.Flush(ctx); err != nil {
		return err
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d of %d trickle records failed to produce", n, sent)
	}
	if err := waitFor(fmt.Sprintf("all %d trickle records on the destination", sent), 2*time.Minute,
		func() bool { return len(lat) >= sent }); err != nil {
		return err
	}
	mu.Lock()
	out := slices.Clone(lat)
	mu.Unlock()
	slices.Sort(out)
	q := func(f float64) time.Duration { return out[min(len(out)-1, int(f*float64(len(out))))] }
	res := quietLatencies{Sent: sent, Arrived: len(out), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: out[len(out)-1]}
	for _, d := range out {
		if d > time.Second {
			res.OverSecond++
		}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s%s\n", quietResult, raw)
	return nil
}
