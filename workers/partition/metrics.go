package partition

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// mirrorMetrics counts what this instance mirrored, per mirror and topic.
// Only verified copies count: a record is mirrored when its acknowledgement
// says it landed at the destination offset it was meant for.
type mirrorMetrics struct {
	records *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	last    *prometheus.GaugeVec
	// checkpoint times the instance's checkpoint saves (one statement for
	// every changed partition, each CheckpointInterval).
	checkpoint prometheus.Histogram
}

func newMirrorMetrics(reg prometheus.Registerer) (*mirrorMetrics, error) {
	m := &mirrorMetrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_mirrored_records_total",
			Help: "Records this instance copied to the destination and verified, by mirror and source topic."}, []string{"mirror", "topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_mirrored_bytes_total",
			Help: "Key and value bytes of the records this instance copied to the destination and verified, by mirror and source topic."}, []string{"mirror", "topic"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_last_mirrored_timestamp_seconds",
			Help: "When this instance last verified a copied record of the topic (Unix time); time() minus it is the seconds since the last mirrored record."}, []string{"mirror", "topic"}),
		checkpoint: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kmirror_checkpoint_save_duration_seconds",
			Help:    "How long saving this instance's changed checkpoints took, one transaction for every partition.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.records, m.bytes, m.last, m.checkpoint} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("partition engine: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// topicMirrored is one topic's series, looked up once per session so that
// counting an acknowledged run costs two atomic adds and a store.
type topicMirrored struct {
	records, bytes prometheus.Counter
	last           prometheus.Gauge
}

func (m *mirrorMetrics) topic(mirror, topic string) topicMirrored {
	if m == nil {
		return topicMirrored{}
	}
	return topicMirrored{records: m.records.WithLabelValues(mirror, topic),
		bytes: m.bytes.WithLabelValues(mirror, topic), last: m.last.WithLabelValues(mirror, topic)}
}

// add counts n verified records of b bytes.
func (t topicMirrored) add(n, b int64) {
	if n <= 0 || t.records == nil {
		return
	}
	t.records.Add(float64(n))
	t.bytes.Add(float64(b))
	t.last.SetToCurrentTime()
}
