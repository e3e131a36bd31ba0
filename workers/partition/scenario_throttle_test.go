package partition_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioThrottle: a mirror limited by mirror.replication.throttled.rate
// copies at the limit (within 5% over 10 s), shares it evenly across its
// partitions, and a PATCH to a higher rate takes effect within 2 s. The
// partitions' rows count the time their copies waited.
func TestScenarioThrottle(t *testing.T) {
	t.Parallel()
	const (
		partitions = 4
		valueSize  = 1024
		first      = 2_000_000 // bytes a second
		second     = 4_000_000
	)
	env := newEngineEnv(t, devcluster.Config{})
	env.CreateSourceTopics(partitions, "bulk")
	// 60 MB: more than 12 s at the first rate and 8 s at the second.
	produceIncompressible(t, env.Clusters.SourceAddr(), "bulk", partitions, 15_000, valueSize)

	ctx := context.Background()
	rate := fmt.Sprint(first)
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()},
		Config: map[string]string{service.CfgThrottledRate: rate}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "bulk"}); err != nil {
		t.Fatal(err)
	}
	// A rate test: the 1 s delivery timeout of the fault tests would fail
	// copies that the in-process destination acknowledges late under the
	// whole suite's load (4 MB/s of 1 KiB records),
	// and the retries would show as a rate below the limit.
	env.StartInstanceOpts("i1", workertest.InstanceOpts{DeliveryTimeout: 10 * time.Second})
	dst := workertest.Plain(env.Clusters.DestinationAddr())
	copied := func() (sum int64, per map[int32]int64) {
		per = workertest.EndOffsets(t, dst, "bulk")
		for _, n := range per {
			sum += n
		}
		return sum, per
	}
	workertest.WaitFor(t, 20*time.Second, "copying to begin", func() (bool, string) {
		n, _ := copied()
		return n > 0, fmt.Sprintf("%d copied", n)
	})
	time.Sleep(time.Second) // past the first batches, which go at once

	// 10 s at the first rate. Each partition's share is its own fitted
	// rate over the window, as the total's is: the difference of its ends
	// at the window's edges would count a copy caught in flight at either
	// edge (acknowledged just after it) as unfairness.
	got, n, rates := copyRate(t, copied, 10*time.Second)
	t.Logf("at %d B/s: copied %.0f B/s", first, got*valueSize)
	if got*valueSize < 0.95*first || got*valueSize > 1.05*first {
		t.Errorf("copied %.0f B/s under a limit of %d B/s, want within 5%%", got*valueSize, first)
	}
	all := 0.0
	for p := range int32(partitions) {
		all += rates[p]
	}
	shares := make([]string, partitions)
	for p := range int32(partitions) {
		shares[p] = fmt.Sprintf("%.1f%%", 100*rates[p]/all)
	}
	t.Logf("the partitions' shares of the copies: %v", shares)
	for p := range int32(partitions) {
		share := rates[p] / all
		if share < 0.2 || share > 0.3 {
			t.Errorf("partition %d had %.0f%% of the copies, want about %d%%", p, 100*share, 100/partitions)
		}
	}

	// A PATCH to the second rate: copying runs at it from 2 s on.
	rate = fmt.Sprint(second)
	if _, err := env.Svc.UpdateMirror(ctx, "m", service.MirrorPatch{Config: map[string]*string{service.CfgThrottledRate: &rate}},
		service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the 2 s the PATCH may take
	got, n, _ = copyRate(t, copied, 5*time.Second)
	t.Logf("from 2 s after the PATCH to %d B/s: copied %.0f B/s", second, got*valueSize)
	if got*valueSize < 0.95*second || got*valueSize > 1.05*second {
		t.Errorf("copied %.0f B/s from 2 s after a PATCH to %d B/s, want within 5%%", got*valueSize, second)
	}
	if n >= partitions*15_000 {
		t.Fatalf("the source ran out of records before the second window ended (%d copied)", n)
	}

	// The rows count the waits once the checkpoint is saved.
	workertest.WaitFor(t, 10*time.Second, "the throttled time in the rows", func() (bool, string) {
		var ms []int64
		for _, p := range env.Partitions("m") {
			ms = append(ms, p.ThrottledMs)
		}
		for _, v := range ms {
			if v < 1000 {
				return false, fmt.Sprintf("throttled ms per partition %v", ms)
			}
		}
		return true, ""
	})

	// No limit: the rest is copied at once, exactly.
	if _, err := env.Svc.UpdateMirror(ctx, "m", service.MirrorPatch{Config: map[string]*string{service.CfgThrottledRate: nil}},
		service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	workertest.WaitMirrored(t, env.Env, "bulk", partitions, 30*time.Second)
}

// copyRate samples the records copied every 100 ms for d and returns the
// rate the samples follow (a least-squares fit, so that the steps in which
// batches land do not count as the window's edges happen to fall), the
// count at the end, and each partition's rate, fitted the same way.
func copyRate(t *testing.T, copied func() (int64, map[int32]int64), d time.Duration) (perSec float64, last int64, parts map[int32]float64) {
	t.Helper()
	var xs, ys []float64
	per := map[int32][]float64{}
	start := time.Now()
	for time.Since(start) < d {
		n, ends := copied()
		xs, ys = append(xs, time.Since(start).Seconds()), append(ys, float64(n))
		for p, e := range ends {
			per[p] = append(per[p], float64(e))
		}
		last = n
		time.Sleep(100 * time.Millisecond) // the sampling interval
	}
	parts = map[int32]float64{}
	for p, pys := range per {
		if len(pys) == len(xs) {
			parts[p] = slope(xs, pys)
		}
	}
	return slope(xs, ys), last, parts
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	return sxy / sxx
}

// produceIncompressible writes n records of size random bytes to each
// partition, uncompressed.
func produceIncompressible(t *testing.T, addr, topic string, partitions int32, n, size int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, 0, int(partitions)*n)
	for p := range partitions {
		for range n {
			v := make([]byte, size)
			rand.Read(v)
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: v})
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestScenarioThrottleFairAcrossBrokers: a throttled mirror whose
// partitions the source's brokers lead unevenly (one broker leads one
// partition, the other eleven) shares the limit evenly across partitions,
// within 2x, not across brokers (each broker's fetch loop waits for one
// copy at a time, so in order of arrival the lone partition had several
// times the share of each of the others). Each partition's throttled time
// rises while it copies behind the throttle.
func TestScenarioThrottleFairAcrossBrokers(t *testing.T) {
	t.Parallel()
	const (
		partitions = 12
		valueSize  = 1024
		rate       = 2_400_000 // bytes a second
	)
	env := newEngineEnv(t, devcluster.Config{SourceBrokers: 2})
	if err := env.Clusters.Source.CreateTopic("bulk", partitions, nil); err != nil {
		t.Fatal(err)
	}
	nodes := env.Clusters.Source.ListenAddrs()
	if len(nodes) != 2 {
		t.Fatalf("source brokers %v, want 2", nodes)
	}
	for p := range int32(partitions) {
		node := int32(0)
		if p == 0 {
			node = 1
		}
		if err := env.Clusters.Source.MoveTopicPartition("bulk", p, node); err != nil {
			t.Fatal(err)
		}
	}
	// 3 MB a partition: more than the whole test at the limit.
	produceIncompressible(t, env.Clusters.SourceAddr(), "bulk", partitions, 3_000, valueSize)
	ctx := context.Background()
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()},
		Config: map[string]string{service.CfgThrottledRate: fmt.Sprint(rate)}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "bulk"}); err != nil {
		t.Fatal(err)
	}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{DeliveryTimeout: 10 * time.Second})
	dst := workertest.Plain(env.Clusters.DestinationAddr())
	copied := func() (sum int64, per map[int32]int64) {
		per = workertest.EndOffsets(t, dst, "bulk")
		for _, n := range per {
			sum += n
		}
		return sum, per
	}
	// Every partition copying before the window opens: on a loaded machine
	// one may reach MIRRORING seconds after the others, and its late start
	// would read as a smaller share.
	workertest.WaitFor(t, 20*time.Second, "every partition to copy", func() (bool, string) {
		_, per := copied()
		started := 0
		for _, n := range per {
			if n > 0 {
				started++
			}
		}
		return started == partitions, fmt.Sprintf("%d of %d partitions copying", started, partitions)
	})
	time.Sleep(time.Second) // past the first batches, which go at once
	throttledBefore := map[int32]int64{}
	for _, p := range env.Partitions("m") {
		throttledBefore[p.Partition] = p.ThrottledMs
	}
	got, _, rates := copyRate(t, copied, 10*time.Second)
	t.Logf("at %d B/s: copied %.0f B/s", rate, got*valueSize)
	shares := make([]string, partitions)
	others := make([]float64, 0, partitions-1)
	for p := range int32(partitions) {
		shares[p] = fmt.Sprintf("%.0f B/s", rates[p]*valueSize)
		if p != 0 {
			others = append(others, rates[p])
		}
	}
	slices.Sort(others)
	median := others[len(others)/2]
	t.Logf("each partition's copy rate (partition 0 alone on its broker): %v", shares)
	// The property: the lone partition's share is the others', within 2x
	// (shared by broker it was several times theirs). And no partition
	// starves: on a loaded machine (the whole suite at once) one of the
	// eleven sharing a fetch loop has been seen at half the others' rate
	// over the window, before and after issue 46's changes, so the bound
	// for them is 3x the median.
	if r := rates[0]; median <= 0 || r > 2*median || 2*r < median {
		t.Errorf("partitions copied at %v: want partition 0, alone on its broker, within 2x of the others' median", shares)
	}
	for p := range int32(partitions) {
		if 3*rates[p] < median {
			t.Errorf("partitions copied at %v: bulk/%d below a third of the median", shares, p)
		}
	}
	// Rising, not a second a second: a partition's copy waits only while
	// it is its fetch loop's turn; the time it waits behind another
	// partition's copy of the same broker is that one's.
	for _, p := range env.Partitions("m") {
		if p.ThrottledMs < throttledBefore[p.Partition]+300 {
			t.Errorf("bulk/%d: throttled_ms %d after 10 s of copying behind the throttle, from %d", p.Partition, p.ThrottledMs, throttledBefore[p.Partition])
		}
	}
}

// TestScenarioThrottledPartitionShowsItsWait: under a limit far below what
// one fetched piece holds (20 KB/s against pieces of up to 256 KiB), a copy
// waits for many seconds. Its row's throttled_ms rises meanwhile, about a
// second a second, rather than staying frozen with its destination offset
// until the wait ends (the soak: both frozen for 2 minutes, with no error).
func TestScenarioThrottledPartitionShowsItsWait(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.CreateSourceTopics(1, "slow")
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
	var last int64
	workertest.WaitFor(t, 10*time.Second, "a first wait to be counted", func() (bool, string) {
		last = env.Partition("m", "slow", 0).ThrottledMs
		return last > 0, ""
	})
	// Over each of three 3 s windows, it rose by at least 2 s.
	for range 3 {
		from := last
		workertest.WaitFor(t, 3*time.Second, "throttled_ms to rise by 2 s", func() (bool, string) {
			r := env.Partition("m", "slow", 0)
			last = r.ThrottledMs
			return last >= from+2_000, fmt.Sprintf("throttled_ms %d, from %d; %s", last, from, describePartition(r))
		})
	}
}

// TestScenarioThrottleLiftedOverBacklog: a throttled mirror holds a
// backlog on many partitions; the limit is lifted, and every partition
// copies its backlog at once. Nothing fails on the way (the soak: 73
// partitions FAILED on delivery timeouts after a lift over 1.18M records),
// and the destination is exact.
func TestScenarioThrottleLiftedOverBacklog(t *testing.T) {
	t.Parallel()
	const partitions, records = 16, 600
	env := newEngineEnv(t, devcluster.Config{})
	env.CreateSourceTopics(partitions, "backlog")
	// Small batches (about 20 records): many of them per partition.
	produceSmallBatches(t, env.Clusters.SourceAddr(), "backlog", partitions, records)
	ctx := context.Background()
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()},
		Config: map[string]string{service.CfgThrottledRate: "100000"}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "backlog"}); err != nil {
		t.Fatal(err)
	}
	// A destination that takes 100 ms to answer each produce request, as
	// a loaded one does: each partition's batches queue behind one
	// another (one request in flight per partition), and the last of a
	// backlog is answered many round trips after it was queued.
	dst := env.Clusters.Destination
	dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		dst.SleepControl(func() { time.Sleep(100 * time.Millisecond) })
		return nil, nil, false
	})
	// The server's delivery timeout.
	env.StartInstanceOpts("i1", workertest.InstanceOpts{DeliveryTimeout: 4 * time.Second})
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	time.Sleep(3 * time.Second) // copies wait for the throttle meanwhile
	if _, err := env.Svc.UpdateMirror(ctx, "m", service.MirrorPatch{Config: map[string]*string{service.CfgThrottledRate: nil}},
		service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	lifted := time.Now()
	workertest.WaitMirrored(t, env.Env, "backlog", partitions, 90*time.Second)
	t.Logf("%d records copied %s after the lift", partitions*records, time.Since(lifted).Round(10*time.Millisecond))
	env.noneFailed("m", "backlog", partitions)
}

// produceSmallBatches writes n records of about 100 bytes to each
// partition, in batches of about 2 KiB.
func produceSmallBatches(t *testing.T, addr, topic string, partitions int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(2<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, 0, int(partitions)*n)
	for p := range partitions {
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%090d", i)})
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
