package metrics

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Metrics counts what this instance mirrored, per mirror and topic.
// Only verified copies count: a record is mirrored when its acknowledgement
// says it landed at the destination offset it was meant for.
type Metrics struct {
	records *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	last    *prometheus.GaugeVec
	// checkpoint times the instance's checkpoint saves (one statement for
	// every changed partition, each CheckpointInterval).
	checkpoint prometheus.Histogram
	// fetch and produce time the Kafka requests of the mirrors' fetchers
	// and of the destination producer, one observation per request.
	fetch   *prometheus.HistogramVec
	produce prometheus.Histogram
	// losses counts the partitions this instance found the destination to
	// have lost (the engine's destination watch).
	losses *prometheus.CounterVec
	// batches counts the source batches a batch copy produced, by how:
	// "whole", or why it was re-encoded.
	batches *prometheus.CounterVec
	// throttled sums how long copies waited for their mirror's
	// replication throttle.
	throttled *prometheus.CounterVec

	mu sync.Mutex
	// touched is when each mirror's series were last looked up, so that
	// ForgetMirrorsExcept never deletes a mirror's series that were made
	// after its list of mirrors was read.
	touched map[string]time.Time
}

// New returns the data plane's metrics, registered with reg unless it is
// nil.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_mirrored_records_total",
			Help: "Records this instance copied to the destination and verified, by mirror and source topic."}, []string{"mirror", "topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_mirrored_bytes_total",
			Help: "Bytes of the records this instance copied to the destination and verified, by mirror and source topic: their keys and values when copying record by record, the batches as stored when copying batches whole."}, []string{"mirror", "topic"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_last_mirrored_timestamp_seconds",
			Help: "When this instance last verified a copied record of the topic (Unix time); time() minus it is the seconds since the last mirrored record."}, []string{"mirror", "topic"}),
		checkpoint: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kmirror_checkpoint_save_duration_seconds",
			Help:    "How long saving this instance's changed checkpoints took, one transaction for every partition.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		fetch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kmirror_fetch_request_duration_seconds",
			Help:    "Source fetch requests of this instance, written to answer read, by mirror. Fetches are long polls: with nothing new they last the fetch max wait.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"mirror"}),
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kmirror_produce_request_duration_seconds",
			Help:    "Destination produce requests of this instance, written to answer read (acks=all).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_destination_losses_total",
			Help: "Partitions this instance found the destination to have lost records of (a topic gone, or its end below what was acknowledged), by mirror and topic; each is re-mirrored from what the destination still holds."}, []string{"mirror", "topic"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_copied_batches_total",
			Help: "Source batches this instance produced when copying batches, by mirror, source topic and how: whole (producer fields and CRC rewritten, records and codec as they were) or re-encoded, by why (an old message format, compaction gaps, log-append time, a compaction delete horizon, a batch that starts before the copy's next offset)."}, []string{"mirror", "topic", "how"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_throttled_seconds_total",
			Help: "Seconds this instance's copies waited for their mirror's replication throttle (mirror.replication.throttled.rate), by mirror and source topic, summed over the topic's partitions: its rate over time is how many partitions were held back at once."}, []string{"mirror", "topic"}),
		touched: map[string]time.Time{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.records, m.bytes, m.last, m.checkpoint, m.fetch, m.produce, m.losses, m.batches, m.throttled} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("partition engine: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// CheckpointSaves observes the duration of each save of the instance's
// checkpoints.
func (m *Metrics) CheckpointSaves() prometheus.Observer { return m.checkpoint }

// Topic is one topic's series, looked up once per session so that
// counting an acknowledged run costs two atomic adds and a store.
type Topic struct {
	records, bytes prometheus.Counter
	last           prometheus.Gauge
}

// Topic returns a topic's series (nil Metrics: ones that count nothing).
func (m *Metrics) Topic(mirror, topic string) Topic {
	if m == nil {
		return Topic{}
	}
	m.touch(mirror)
	// The topic's loss count starts at 0, so an alert on its increase
	// sees the first loss.
	m.losses.WithLabelValues(mirror, topic)
	return Topic{records: m.records.WithLabelValues(mirror, topic),
		bytes: m.bytes.WithLabelValues(mirror, topic), last: m.last.WithLabelValues(mirror, topic)}
}

// Add counts n verified records and b bytes (the bytes of a batch may
// arrive with a later call than its records).
func (t Topic) Add(n, b int64) {
	if t.records == nil {
		return
	}
	if n > 0 {
		t.records.Add(float64(n))
		t.last.SetToCurrentTime()
	}
	if b > 0 {
		t.bytes.Add(float64(b))
	}
}

// BatchCopied counts a source batch of the topic that a batch copy
// produced: how is "whole" or why it was re-encoded
// (recordbatch.WholeCopyProblem).
func (m *Metrics) BatchCopied(mirror, topic, how string) {
	if m == nil {
		return
	}
	m.touch(mirror)
	m.batches.WithLabelValues(mirror, topic, how).Inc()
}

// Throttled counts d of a partition's copies waiting for the mirror's
// replication throttle.
func (m *Metrics) Throttled(mirror, topic string, d time.Duration) {
	if m == nil || d <= 0 {
		return
	}
	m.touch(mirror)
	m.throttled.WithLabelValues(mirror, topic).Add(d.Seconds())
}

// Lost counts a partition found lost on the destination.
func (m *Metrics) Lost(mirror, topic string) {
	if m == nil {
		return
	}
	m.touch(mirror)
	m.losses.WithLabelValues(mirror, topic).Inc()
}

// Kafka API keys of the requests timed.
const (
	produceKey int16 = 0
	fetchKey   int16 = 1
)

// requestTimer is a kgo hook that observes the round trip of one kind of
// request: once per request, never per record.
type requestTimer struct {
	key int16
	h   prometheus.Observer
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (r requestTimer) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key == r.key && e.Err() == nil {
		r.h.Observe(e.DurationE2E().Seconds())
	}
}

// ProduceOpt and FetchOpt time the producer's and a mirror's fetcher's
// requests.
func (m *Metrics) ProduceOpt() kgo.Opt {
	if m == nil {
		return kgo.WithHooks()
	}
	return kgo.WithHooks(requestTimer{produceKey, m.produce})
}

func (m *Metrics) FetchOpt(mirror string) kgo.Opt {
	if m == nil {
		return kgo.WithHooks()
	}
	m.touch(mirror)
	return kgo.WithHooks(requestTimer{fetchKey, m.fetch.WithLabelValues(mirror)})
}

func (m *Metrics) touch(mirror string) {
	m.mu.Lock()
	m.touched[mirror] = time.Now()
	m.mu.Unlock()
}

// ForgetMirrorsExcept deletes the series of every mirror not in present,
// a list of mirrors read at readAt, unless they were looked up since: a
// deleted mirror's series would otherwise stay in /metrics for as long as
// the process runs. A mirror's topic rows go only with the mirror, and a
// lease that moves leaves them, so a mirror missing from the list is gone.
// Handles looked up before (a session's, a fetcher's) keep counting into
// series that are no longer exported.
func (m *Metrics) ForgetMirrorsExcept(present map[string]bool, readAt time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for mirror, at := range m.touched {
		if present[mirror] || at.After(readAt) {
			continue
		}
		labels := prometheus.Labels{"mirror": mirror}
		m.records.DeletePartialMatch(labels)
		m.bytes.DeletePartialMatch(labels)
		m.last.DeletePartialMatch(labels)
		m.fetch.DeletePartialMatch(labels)
		m.losses.DeletePartialMatch(labels)
		m.batches.DeletePartialMatch(labels)
		m.throttled.DeletePartialMatch(labels)
		delete(m.touched, mirror)
	}
}
