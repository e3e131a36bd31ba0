package partition_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devcluster"
	"kmirror/repo"
	"kmirror/workers/workertest"
)

// Throughput of one instance mirroring a pre-filled source topic into a
// destination that discards what it receives (kfake.BlackholeProduce keeps
// broker storage out of the measurement), against a plain franz-go
// consume→produce loop on the same clusters. Run with -benchtime=1x:
//
//	go test ./workers -run '^$' -bench Throughput -benchtime=1x
const (
	benchPartitions = 4
	benchRecords    = 120_000 // per partition
	benchValueBytes = 1024
)

func BenchmarkThroughput(b *testing.B) {
	b.Run("kmirror", func(b *testing.B) { benchCopy(b, copyWithKmirror) })
	b.Run("plain-franz-go", func(b *testing.B) { benchCopy(b, copyPlain) })
}

type copier func(b *testing.B, env *engineEnv, topic string, ends map[int32]int64)

func benchCopy(b *testing.B, copy copier) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		env := newBenchEnv(b)
		topic := fmt.Sprintf("bench-%d", i)
		ends := fillSource(b, env, topic)
		total := int64(benchPartitions * benchRecords * benchValueBytes)
		b.SetBytes(total)
		start := time.Now()
		b.StartTimer()
		copy(b, env, topic, ends)
		b.StopTimer()
		elapsed := time.Since(start)
		b.ReportMetric(float64(total)/elapsed.Seconds()/1e6, "MB/s")
		b.ReportMetric(float64(benchPartitions*benchRecords)/elapsed.Seconds(), "records/s")
	}
}

func newBenchEnv(b *testing.B) *engineEnv {
	b.Helper()
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{DestinationOpts: []kfake.Opt{kfake.BlackholeProduce()}})}
	return env
}

// fillSource writes the benchmark records and returns each partition's end.
func fillSource(b *testing.B, env *engineEnv, topic string) map[int32]int64 {
	b.Helper()
	if err := env.Clusters.Source.CreateTopic(topic, benchPartitions, nil); err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, benchValueBytes)
	ctx := context.Background()
	for p := int32(0); p < benchPartitions; p++ {
		for i := 0; i < benchRecords; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprint(i)), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	ends := map[int32]int64{}
	for p := int32(0); p < benchPartitions; p++ {
		ends[p] = benchRecords
	}
	return ends
}

// copyWithKmirror mirrors the topic with one instance and waits until every
// partition's checkpoint reaches the source end.
func copyWithKmirror(b *testing.B, env *engineEnv, topic string, ends map[int32]int64) {
	env.CreateMirror("bench", topic)
	env.StartInstance("bench-1")
	deadline := time.Now().Add(5 * time.Minute)
	var mirroringAt time.Time
	for {
		ps, err := repo.PartitionsList(context.Background(), env.Pool, repo.PartitionsListParams{Mirror: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		done, mirroring := 0, 0
		for _, p := range ps {
			if p.State == "MIRRORING" {
				mirroring++
			}
			// The checkpoint is saved about once a second; the produced
			// end offset is what the destination acknowledged.
			if p.SrcNext != nil && *p.SrcNext >= ends[p.Partition] {
				done++
			}
		}
		if mirroringAt.IsZero() && mirroring == benchPartitions {
			mirroringAt = time.Now()
		}
		if done == benchPartitions {
			// Copy rate once every partition is MIRRORING, without the
			// start-up (leases, alignment, topic creation).
			if !mirroringAt.IsZero() {
				b.ReportMetric(float64(benchPartitions*benchRecords*benchValueBytes)/time.Since(mirroringAt).Seconds()/1e6, "steady-MB/s")
			}
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("mirroring did not finish: %d/%d partitions", done, benchPartitions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copyPlain is the baseline: one consumer, one idempotent producer, no
// checkpoints or checks.
func copyPlain(b *testing.B, env *engineEnv, topic string, ends map[int32]int64) {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < benchPartitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	src, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	if err := env.Clusters.Destination.CreateTopic(topic, benchPartitions, nil); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	copied := 0
	for copied < benchPartitions*benchRecords {
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
}
