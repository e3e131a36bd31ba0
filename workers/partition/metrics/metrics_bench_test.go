package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRequestTimer is the kgo hook that times each fetch and produce
// request: one histogram observation per request (a request carries whole
// batches of many partitions).
func BenchmarkRequestTimer(b *testing.B) {
	m, err := New(prometheus.NewRegistry())
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
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	t := m.Topic("m", "orders")
	b.ReportAllocs()
	for b.Loop() {
		t.Add(100, 11600)
	}
}
