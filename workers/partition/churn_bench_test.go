package partition_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// BenchmarkNeighbourChurn: does pausing and resuming some topics of a
// mirror slow the copy of its other topics? All partitions of a mirror on an
// instance share one source fetch client, so what a pause or resume does to
// that client reaches every topic of the mirror.
//
// Mirror m carries topic bench (3 partitions) and ten topics ctl-00..ctl-09
// (2 partitions each, no traffic), on one instance with the server's
// timings; the destination blackholes records (kfake.BlackholeProduce), so
// only the copy is measured. Each drain produces a backlog to bench while it
// is paused, resumes it and times the copy by the destination's end offsets.
// Drains alternate quiet and churned; in a churned one ten goroutines pause
// and resume a ctl topic each, through the service (no API), every 100 ms:
// 100 topic transitions a second, the rate the control-plane benchmark's ten
// clients reached. The slowdown compares the medians.
//
//	go test ./workers/partition -run '^$' -bench NeighbourChurn -benchtime=1x
func BenchmarkNeighbourChurn(b *testing.B) {
	const (
		records = 1_500_000
		value   = 100
		drains  = 4 // of each kind
	)
	ctx := context.Background()
	env := &engineEnv{workertest.NewEnvTB(b, devcluster.Config{DestinationOpts: []kfake.Opt{kfake.BlackholeProduce()}})}
	env.CreateSourceTopics(3, "bench")
	var ctl []string
	for i := range 10 {
		ctl = append(ctl, fmt.Sprintf("ctl-%02d", i))
	}
	env.CreateSourceTopics(2, ctl...)
	env.CreateMirror("m", `bench|ctl-.*`)
	fetched := &fetchCounter{topic: "bench"}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{ProductionTimings: true, SourceOpts: []kgo.Opt{kgo.WithHooks(fetched)}})
	env.WaitStates("m", service.StateMirroring, time.Minute)

	src, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	adm := kadm.NewClient(dst)
	payload := make([]byte, value)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}

	var produced int64
	drain := func(churn bool) (rate, refetched float64) {
		if _, err := env.Svc.PauseTopics(ctx, "m", "bench"); err != nil {
			b.Fatal(err)
		}
		workertest.WaitFor(b, time.Minute, "bench paused", func() (bool, string) {
			for p := range int32(3) {
				if st := env.Partition("m", "bench", p).State; st != service.StatePaused {
					return false, fmt.Sprintf("bench/%d %s", p, st)
				}
			}
			return true, ""
		})
		for i := range records {
			src.Produce(ctx, &kgo.Record{Topic: "bench", Partition: int32(i % 3), Value: payload}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := src.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		produced += records
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if churn {
			for _, topic := range ctl {
				wg.Go(func() {
					t := time.NewTicker(100 * time.Millisecond)
					defer t.Stop()
					for paused := false; ; paused = !paused {
						select {
						case <-stop:
							if paused {
								_, _ = env.Svc.ResumeTopics(ctx, "m", topic)
							}
							return
						case <-t.C:
						}
						var err error
						if paused {
							_, err = env.Svc.ResumeTopics(ctx, "m", topic)
						} else {
							_, err = env.Svc.PauseTopics(ctx, "m", topic)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			time.Sleep(time.Second)
		}
		before := fetched.n.Load()
		start := time.Now()
		if _, err := env.Svc.ResumeTopics(ctx, "m", "bench"); err != nil {
			b.Fatal(err)
		}
		deadline := start.Add(5 * time.Minute)
		for {
			ends, err := adm.ListEndOffsets(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			var sum int64
			ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
			if sum >= produced {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("copied %d of %d in 5m", sum, produced)
			}
			time.Sleep(5 * time.Millisecond)
		}
		elapsed := time.Since(start)
		close(stop)
		wg.Wait()
		return float64(records) / elapsed.Seconds(), float64(fetched.n.Load()-before)/records - 1
	}

	b.ResetTimer()
	var quiet, churned, quietRefetch, churnRefetch []float64
	for range drains {
		r, x := drain(false)
		quiet, quietRefetch = append(quiet, r), append(quietRefetch, x)
		r, x = drain(true)
		churned, churnRefetch = append(churned, r), append(churnRefetch, x)
	}
	b.StopTimer()
	q, c := median(quiet), median(churned)
	benchReport(b, "quiet drains %v records/s, churned %v: median %.0f vs %.0f, slowdown %.0f%%; "+
		"records fetched again: quiet %.1f%%, churned %.1f%% (medians)",
		rounded(quiet), rounded(churned), q, c, 100*(1-c/q), 100*median(quietRefetch), 100*median(churnRefetch))
	b.ReportMetric(q, "quiet-records/s")
	b.ReportMetric(c, "churned-records/s")
	b.ReportMetric(100*(1-c/q), "slowdown-%")
	b.ReportMetric(100*median(churnRefetch), "churned-refetched-%")
}

// fetchCounter counts the records kgo reads from the source for one topic,
// discarded reads included: a fetch dropped with a consumer session is
// read again.
type fetchCounter struct {
	topic string
	n     atomic.Int64
}

func (c *fetchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
	if topic == c.topic {
		c.n.Add(int64(m.NumRecords))
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}
