package partition_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkLatency: end-to-end latency at a steady 5,000 records/s over 12
// partitions, from the send on the source to the record's arrival at a
// consumer of the destination, for kmirror (one instance as the server
// runs it: its timings, syncer and __mirror_state relay) and for a plain franz-go copy loop measured the same way in the
// same run (its own topic on the same clusters). Each record carries its
// send time; p50, p99 and max are reported for each, and their ratios.
//
//	go test ./workers/partition -run '^$' -bench Latency -benchtime=1x -timeout 10m
//
// KMIRROR_BENCH_WINDOW (default 60s) sets how long each is measured. At
// 5,000 records a second the 99th percentile is the slowest 1% of the
// window: in a 20 s window one half-second disturbance of either copier
// (most runs have one, in both) lifts p99 by itself.
func BenchmarkLatency(b *testing.B) {
	window := time.Minute
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_BENCH_WINDOW")); err == nil {
		window = d
	}
	const partitions = 12
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{})}
	for _, t := range []string{"lat-loop", "lat-kmirror"} {
		if err := env.Clusters.Source.CreateTopic(t, partitions, nil); err != nil {
			b.Fatal(err)
		}
		if err := env.Clusters.Destination.CreateTopic(t, partitions, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()

	// The reference: a read_committed consumer and an idempotent producer
	// in a loop, as BenchmarkThroughput's plain copier.
	loopCtx, stopLoop := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	loop.Go(func() { copyLoop(b, loopCtx, env, "lat-loop") })
	ref := measureLatency(b, env, "lat-loop", partitions, window)
	stopLoop()
	loop.Wait()

	env.CreateMirror("lat", "lat-kmirror")
	startServerInstance(env.Env, "i1")
	env.WaitStates("lat", service.StateMirroring, time.Minute)
	km := measureLatency(b, env, "lat-kmirror", partitions, window)
	b.StopTimer()

	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ref.p50), "loop-p50-ms")
	b.ReportMetric(ms(ref.p99), "loop-p99-ms")
	b.ReportMetric(ms(ref.max), "loop-max-ms")
	b.ReportMetric(ms(km.p50), "kmirror-p50-ms")
	b.ReportMetric(ms(km.p99), "kmirror-p99-ms")
	b.ReportMetric(ms(km.max), "kmirror-max-ms")
	b.Logf("%d records each at 5,000/s: loop p50 %s p99 %s max %s; kmirror p50 %s p99 %s max %s (%.2fx, %.2fx)",
		km.n, ref.p50, ref.p99, ref.max, km.p50, km.p99, km.max, ms(km.p50)/ms(ref.p50), ms(km.p99)/ms(ref.p99))
}

// copyLoop copies topic from the source to the destination, partition for
// partition, until ctx ends.
func copyLoop(b *testing.B, ctx context.Context, env *engineEnv, topic string) {
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
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
		fs.EachRecord(func(r *kgo.Record) {
			prod.Produce(ctx, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}, nil)
		})
	}
}

type latencies struct {
	n             int
	p50, p99, max time.Duration
}

// measureLatency sends 5,000 records/s round-robin over the partitions of
// topic for window and returns how long each took to reach a consumer of
// the destination topic. Every record sent must arrive.
func measureLatency(b *testing.B, env *engineEnv, topic string, partitions int32, window time.Duration) latencies {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// No linger on the sender or the loop: the clients' default wait for a
	// fuller batch would be measured as mirroring latency.
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	// The consumer starts at the end, before anything is sent.
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	warm, warmed := context.WithTimeout(ctx, time.Second)
	cons.PollFetches(warm)
	warmed()

	var mu sync.Mutex
	var lat []time.Duration
	var reading sync.WaitGroup
	reading.Go(func() {
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) == 8 {
					lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
				}
			})
			mu.Unlock()
		}
	})
	defer reading.Wait()
	defer cancel()

	// 50 records every 10 ms: 5,000 a second.
	tick := time.NewTicker(10 * time.Millisecond)
	end := time.Now().Add(window)
	var p int32
	sent := 0
	for time.Now().Before(end) {
		<-tick.C
		for range 50 {
			v := make([]byte, 8)
			binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
			prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, nil)
			p = (p + 1) % partitions
			sent++
		}
	}
	tick.Stop()
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	arrived := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(lat)
	}
	workertest.WaitFor(b, time.Minute, fmt.Sprintf("all %d records of %s on the destination", sent, topic), func() (bool, string) {
		n := arrived()
		return n >= sent, fmt.Sprint(n)
	})
	mu.Lock()
	out := slices.Clone(lat)
	mu.Unlock()
	slices.Sort(out)
	q := func(f float64) time.Duration { return out[min(len(out)-1, int(f*float64(len(out))))] }
	return latencies{n: len(out), p50: q(0.5), p99: q(0.99), max: out[len(out)-1]}
}
