package partition

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/workers/partition/produce"
)

// BenchmarkAckedBatch is the data plane's bookkeeping of one fetched batch
// of 100 records (16-byte keys, 100-byte values) once produced: the produce
// promise per record, then the worker's handleAcks for the batch, which
// advances the checkpoint and counts the verified copies. "metrics" counts
// them in the kmirror_mirrored_* series of a real registry (looked up once
// per session, as a session does); "none" is an engine without a registry,
// whose add returns at once. The difference is what the metrics cost per
// batch. It needs no database or cluster:
//
//	go test ./workers/partition -run '^$' -bench 'AckedBatch|RequestTimer' -count 5
func BenchmarkAckedBatch(b *testing.B) {
	for _, bc := range []struct {
		name     string
		mirrored func(b *testing.B) topicMirrored
	}{
		{"metrics", func(b *testing.B) topicMirrored {
			m, err := newMirrorMetrics(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			return m.topic("m", "orders")
		}},
		{"none", func(*testing.B) topicMirrored { return (*mirrorMetrics)(nil).topic("m", "orders") }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const batch = 100
			recs := make([]*kgo.Record, batch)
			for i := range recs {
				recs[i] = &kgo.Record{Key: make([]byte, 16), Value: make([]byte, 100)}
			}
			s := &mirrorSession{acks: produce.NewAcks(0, nil, nil), mirrored: bc.mirrored(b)}
			next := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				s.pending = append(s.pending, pendingRun{src: next, dst: next, n: batch})
				s.acks.SetProducedEnd(next + batch)
				for _, r := range recs {
					r.Offset = next
					next++
					s.acks.Promise(r, nil)
				}
				s.handleAcks()
			}
			if s.taken != next || s.failure != nil || s.countedBytes != next*116 {
				b.Fatalf("took %d of %d copies (%d bytes), failure %v", s.taken, next, s.countedBytes, s.failure)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next), "ns/record")
		})
	}
}

// BenchmarkRequestTimer is the kgo hook that times each fetch and produce
// request: one histogram observation per request (a request carries whole
// batches of many partitions).
func BenchmarkRequestTimer(b *testing.B) {
	m, err := newMirrorMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	hook := requestTimer{produceKey, m.produce}
	e := kgo.BrokerE2E{TimeToWrite: 200 * time.Microsecond, ReadWait: 3 * time.Millisecond, TimeToRead: 100 * time.Microsecond}
	b.ReportAllocs()
	for b.Loop() {
		hook.OnBrokerE2E(kgo.BrokerMetadata{}, produceKey, e)
	}
}

// BenchmarkMirroredAdd is the metric update alone, once per acknowledged
// run (a batch): two counter adds and a timestamp.
func BenchmarkMirroredAdd(b *testing.B) {
	m, err := newMirrorMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	t := m.topic("m", "orders")
	b.ReportAllocs()
	for b.Loop() {
		t.add(100, 11600)
	}
}
