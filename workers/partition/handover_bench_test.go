package partition_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/lease"
	"kmirror/workers/workertest"
)

// BenchmarkHandover: three instances with the server's timings (lease TTL
// 15 s) share 300 partitions. One crashes (its workers vanish, its
// session is not ended): how long until every partition it held copies a
// new record again; the target is within TTL + 5 s. Then one stops
// gracefully (its leases are handed back): how long until its partitions
// copy again; the target is 2 s. Each measurement starts when the
// instance goes away and ends when a record written to each of its
// partitions at that moment is on the destination. At the end every
// partition's destination must hold exactly the source's records.
// KMIRROR_BENCH_PARTITIONS (default 300; a multiple of 300) sets how many
// partitions the three share, in topics of 100. KMIRROR_BENCH_PROFILE_DIR
// writes profiles of the graceful stop's window (profilePhase).
//
//	go test ./workers/partition -run '^$' -bench Handover -benchtime=1x -timeout 20m
func BenchmarkHandover(b *testing.B) {
	const perTopic = 100
	topics := 3
	if v := os.Getenv("KMIRROR_BENCH_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 300 || n%300 != 0 {
			b.Fatalf("KMIRROR_BENCH_PARTITIONS=%q: want a multiple of 300", v)
		}
		topics = n / perTopic
	}
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{})}
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("ho-%03d", i)
		if err := env.Clusters.Source.CreateTopic(names[i], perTopic, nil); err != nil {
			b.Fatal(err)
		}
	}
	env.CreateMirror("m", `ho-\d+`)
	opts := workertest.InstanceOpts{ProductionTimings: true}
	ins := []*workertest.Instance{env.StartInstanceOpts("i1", opts), env.StartInstanceOpts("i2", opts), env.StartInstanceOpts("i3", opts)}

	src, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	srcAdm, dstAdm := kadm.NewClient(src), kadm.NewClient(dst)

	waitShared(b, env, ins, topics*perTopic)
	b.ResetTimer()

	crashed := ins[0].Engine.Running()
	start := time.Now()
	ins[0].Crash()
	crash := timeToCopy(b, "crash", src, srcAdm, dstAdm, crashed, start, 2*time.Minute)

	stopped := ins[1].Engine.Running()
	stopProfile := profilePhase(b, "handover-graceful")
	start = time.Now()
	sampled := sampleRunning(ins[2], stopped, start)
	ins[1].Stop()
	stoppedIn := time.Since(start)
	graceful := timeToCopy(b, "graceful stop", src, srcAdm, dstAdm, stopped, start, 2*time.Minute)
	stopProfile()
	b.Logf("graceful stop: %s returned after %s; %s; %s", ins[1].ID, stoppedIn.Round(time.Millisecond),
		sampled(), ownerEvents(b, env, start, len(stopped)))
	b.StopTimer()

	for _, t := range names {
		workertest.WaitEndsEqual(b, env.Env, t, perTopic, time.Minute)
	}
	b.ReportMetric(crash.Seconds(), "crash-takeover-s")
	b.ReportMetric(graceful.Seconds(), "graceful-handover-s")
	b.Logf("crash of %s (%d partitions): all copying again after %s (target TTL 15s + 5s); graceful stop of %s (%d partitions): after %s (target 2s); destination exact",
		ins[0].ID, len(crashed), crash.Round(time.Millisecond), ins[1].ID, len(stopped), graceful.Round(time.Millisecond))
}

// waitShared waits until every partition is MIRRORING with a worker on one
// of the instances, each running about a third.
func waitShared(b *testing.B, env *engineEnv, ins []*workertest.Instance, total int) {
	workertest.WaitFor(b, 3*time.Minute, "partitions MIRRORING and shared", func() (bool, string) {
		running, desc := 0, ""
		for _, in := range ins {
			n := len(in.Engine.Running())
			running += n
			desc += fmt.Sprintf("%s runs %d; ", in.ID, n)
			if n < total/len(ins)-1 || n > total/len(ins)+1 {
				return false, desc
			}
		}
		mirroring := 0
		for _, p := range env.Partitions("m") {
			if p.State == service.StateMirroring {
				mirroring++
			}
		}
		return running == total && mirroring == total, fmt.Sprintf("%s%d MIRRORING", desc, mirroring)
	})
}

// timeToCopy writes one record to each of keys and returns how long after
// start the last of them reached the destination; it logs when a tenth
// and half of them had.
func timeToCopy(b *testing.B, what string, src *kgo.Client, srcAdm, dstAdm *kadm.Client, keys []lease.Key, start time.Time, timeout time.Duration) time.Duration {
	ctx := context.Background()
	rs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		rs[i] = &kgo.Record{Topic: k.Topic, Partition: k.Partition, Value: []byte("handover")}
	}
	if err := src.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	topicsOf := map[string]bool{}
	for _, k := range keys {
		topicsOf[k.Topic] = true
	}
	var ts []string
	for t := range topicsOf {
		ts = append(ts, t)
	}
	want, err := srcAdm.ListEndOffsets(ctx, ts...)
	if err != nil {
		b.Fatal(err)
	}
	deadline := start.Add(timeout)
	var tenth, half time.Duration
	for {
		got, err := dstAdm.ListEndOffsets(ctx, ts...)
		behind := 0
		for _, k := range keys {
			w, _ := want.Lookup(k.Topic, k.Partition)
			g, ok := got.Lookup(k.Topic, k.Partition)
			if err != nil || !ok || g.Offset < w.Offset {
				behind++
			}
		}
		arrived := len(keys) - behind
		if tenth == 0 && arrived*10 >= len(keys) {
			tenth = time.Since(start)
		}
		if half == 0 && arrived*2 >= len(keys) {
			half = time.Since(start)
		}
		if behind == 0 {
			all := time.Since(start)
			b.Logf("%s, %d partitions: markers on the destination, 10%% after %s, 50%% after %s, all after %s",
				what, len(keys), tenth.Round(time.Millisecond), half.Round(time.Millisecond), all.Round(time.Millisecond))
			return all
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d partitions not copying %s after the instance went away", behind, len(keys), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sampleRunning samples, every 10 ms, how many of keys have a worker on in;
// the returned func stops it and says when a tenth, half and all had.
func sampleRunning(in *workertest.Instance, keys []lease.Key, start time.Time) func() string {
	want := make(map[lease.Key]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	marks := []float64{0.1, 0.5, 1}
	at := make([]time.Duration, len(marks))
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			n := 0
			for _, k := range in.Engine.Running() {
				if want[k] {
					n++
				}
			}
			for i, m := range marks {
				if at[i] == 0 && float64(n) >= m*float64(len(keys)) {
					at[i] = time.Since(start)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() string {
		close(done)
		<-finished
		return fmt.Sprintf("workers on %s: 10%% after %s, 50%% after %s, all after %s", in.ID,
			at[0].Round(time.Millisecond), at[1].Round(time.Millisecond), at[2].Round(time.Millisecond))
	}
}

// ownerEvents says when the takeovers' partition.owner events (written
// once the new owner re-aligned) were committed, relative to start.
func ownerEvents(b *testing.B, env *engineEnv, start time.Time, n int) string {
	var p10, p50, p100 float64
	var count int
	err := env.Pool.QueryRow(context.Background(), `
		SELECT count(*),
		       coalesce(percentile_disc(0.1) WITHIN GROUP (ORDER BY extract(epoch FROM at - $1)), 0),
		       coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM at - $1)), 0),
		       coalesce(max(extract(epoch FROM at - $1)), 0)
		FROM events WHERE kind = $2 AND at >= $1`, start, service.EventPartitionOwner).Scan(&count, &p10, &p50, &p100)
	if err != nil {
		b.Fatal(err)
	}
	return fmt.Sprintf("%d of %d owner events: 10%% at %.3fs, 50%% at %.3fs, last at %.3fs", count, n, p10, p50, p100)
}
