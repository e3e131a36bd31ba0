package worker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/workers/partition/metrics"
)

// BenchmarkAckedBatch is the data plane's bookkeeping of one fetched batch
// of 100 records (16-byte keys, 100-byte values) once produced: the batch's
// produce promise, then the worker's handleAcks for the batch, which
// advances the checkpoint and counts the verified copies. "metrics" counts
// them in the kmirror_mirrored_* series of a real registry (looked up once
// per session, as a session does); "none" is an engine without a registry,
// whose add returns at once. The difference is what the metrics cost per
// batch. It needs no database or cluster:
//
//	go test ./workers/partition/... -run '^$' -bench 'AckedBatch|RequestTimer' -count 5
func BenchmarkAckedBatch(b *testing.B) {
	for _, bc := range []struct {
		name     string
		mirrored func(b *testing.B) metrics.Topic
	}{
		{"metrics", func(b *testing.B) metrics.Topic {
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			return m.Topic("m", "orders")
		}},
		{"none", func(*testing.B) metrics.Topic { return (*metrics.Metrics)(nil).Topic("m", "orders") }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const batch = 100
			s := &session{acks: batchproduce.NewAcks(0, nil, nil), mirrored: bc.mirrored(b)}
			next := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				s.pending = append(s.pending, pendingRun{src: next, dst: next, n: batch})
				s.acks.SetProducedEnd(next + batch)
				s.acks.PromiseBatch(batch, batch*116, next, nil)
				next += batch
				s.handleAcks()
			}
			if s.taken != next || s.failure != nil || s.countedBytes != next*116 {
				b.Fatalf("took %d of %d copies (%d bytes), failure %v", s.taken, next, s.countedBytes, s.failure)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next), "ns/record")
		})
	}
}
