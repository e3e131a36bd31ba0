package service

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"kmirror/repo"
)

// StateCollector exports partition states, lag, lost records, the
// outbox backlog and cluster reachability from Postgres at scrape time, so every instance reports the whole deployment
// consistently, whoever holds the leases.
type StateCollector struct {
	pool       *pgxpool.Pool
	partitions *prometheus.Desc
	lag        *prometheus.Desc
	lost       *prometheus.Desc
	erroring   *prometheus.Desc
	up         *prometheus.Desc
	outbox     *prometheus.Desc
	outboxAge  *prometheus.Desc
	partLag    *prometheus.Desc
	reachable  *prometheus.Desc
	lagSeconds *prometheus.Desc
}

// PartitionLagLimit is the most partitions whose lag is exported one series
// each (kmirror_partition_lag_records); above it only the per-topic sum is.
const PartitionLagLimit = 1000

// NewStateCollector returns a collector over the database.
func NewStateCollector(pool *pgxpool.Pool) *StateCollector {
	return &StateCollector{
		pool: pool,
		partitions: prometheus.NewDesc("kmirror_partitions", "Mirror partitions by state.",
			[]string{"mirror", "topic", "state"}, nil),
		lag: prometheus.NewDesc("kmirror_lag_records", "Source end offset minus the next source offset to mirror, summed over the topic's partitions.",
			[]string{"mirror", "topic"}, nil),
		lost: prometheus.NewDesc("kmirror_lost_records_total", "Source records removed by retention before they were mirrored.",
			[]string{"mirror", "topic"}, nil),
		erroring: prometheus.NewDesc("kmirror_partitions_erroring", "Mirror partitions with an error, FAILED or still retrying in their state (a source that cannot be reached, for example).",
			[]string{"mirror", "topic", "state"}, nil),
		up:     prometheus.NewDesc("kmirror_state_scrape_ok", "1 when the partition state and outbox queries succeeded.", nil, nil),
		outbox: prometheus.NewDesc("kmirror_outbox_unpublished_rows", "Outbox rows not yet published to __mirror_state.", nil, nil),
		partLag: prometheus.NewDesc("kmirror_partition_lag_records", "Source end offset minus the next source offset to mirror, per partition; exported only while the deployment has at most 1000 partitions.",
			[]string{"mirror", "topic", "partition"}, nil),
		outboxAge: prometheus.NewDesc("kmirror_outbox_oldest_unpublished_age_seconds", "Age of the oldest outbox row not yet published to __mirror_state (0 when none).", nil, nil),
		lagSeconds: prometheus.NewDesc("kmirror_replication_lag_seconds", "Lag in time, the RPO: the age of the oldest source record not yet on the destination, the largest over the topic's partitions whose lag in time is known (0 when caught up; STOPPED ones have none). It grows while a partition is paused, failed or unowned. No series while no partition's is known.",
			[]string{"mirror", "topic"}, nil),
		reachable: prometheus.NewDesc("kmirror_cluster_reachable", "1 when kmirror's last probe reached the cluster, 0 when it failed: a mirror's source (probed by the holder of its metadata lease), or the destination (cluster=\"destination\", no mirror; 0 when any live instance fails to reach it). No series while no live instance has probed it.",
			[]string{"cluster", "mirror"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.partitions
	ch <- c.lag
	ch <- c.lost
	ch <- c.erroring
	ch <- c.up
	ch <- c.outbox
	ch <- c.outboxAge
	ch <- c.partLag
	ch <- c.reachable
	ch <- c.lagSeconds
}

// stateScrapeTimeout bounds the query of one scrape.
const stateScrapeTimeout = 3 * time.Second

// Collect implements prometheus.Collector with one query.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateScrapeTimeout)
	defer cancel()
	backlog, age, err := repo.OutboxBacklog(ctx, c.pool)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.outbox, prometheus.GaugeValue, float64(backlog))
	ch <- prometheus.MustNewConstMetric(c.outboxAge, prometheus.GaugeValue, age)
	counts, err := repo.PartitionsCountByState(ctx, c.pool)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	type topicKey struct{ mirror, topic string }
	type stateCount struct{ partitions, erroring int64 }
	// Every state gets a series for every topic, zeros included, so that
	// kmirror_partitions{state="FAILED"} > 0 alerts work and a state that
	// empties reads 0 rather than disappearing. UNKNOWN (no state yet) is
	// reported only while partitions have it.
	var keys []topicKey
	byKey := map[topicKey]map[string]stateCount{}
	lag, lost := map[topicKey]float64{}, map[topicKey]float64{}
	lagMs := map[topicKey]int64{}
	for _, g := range counts {
		k := topicKey{g.Mirror, g.Topic}
		if byKey[k] == nil {
			byKey[k] = map[string]stateCount{}
			keys = append(keys, k)
		}
		byKey[k][g.State] = stateCount{g.Partitions, g.Erroring}
		lag[k] += float64(g.Lag)
		lost[k] += float64(g.LostRecords)
		if m := g.MaxLagMs; m != nil {
			if old, ok := lagMs[k]; !ok || *m > old {
				lagMs[k] = *m
			}
		}
	}
	for _, k := range keys {
		emit := func(state string, n stateCount) {
			ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(n.partitions), k.mirror, k.topic, state)
			ch <- prometheus.MustNewConstMetric(c.erroring, prometheus.GaugeValue, float64(n.erroring), k.mirror, k.topic, state)
		}
		for _, st := range AllStates {
			emit(string(st), byKey[k][string(st)])
		}
		if n, ok := byKey[k][StateUnknown.String()]; ok {
			emit(StateUnknown.String(), n)
		}
	}
	total := int64(0)
	for _, g := range counts {
		total += g.Partitions
	}
	if total <= PartitionLagLimit {
		parts, err := repo.PartitionsLag(ctx, c.pool)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
			return
		}
		for _, p := range parts {
			ch <- prometheus.MustNewConstMetric(c.partLag, prometheus.GaugeValue, float64(p.Lag), p.Mirror, p.Topic, strconv.Itoa(int(p.Partition)))
		}
	}
	reach, err := repo.ClusterReachabilityList(ctx, c.pool, "")
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	sources, dst := clusterReachability(reach)
	for mirror, r := range sources {
		ch <- prometheus.MustNewConstMetric(c.reachable, prometheus.GaugeValue, boolValue(r.Reachable), "source", mirror)
	}
	if dst.Known {
		ch <- prometheus.MustNewConstMetric(c.reachable, prometheus.GaugeValue, boolValue(dst.Reachable), "destination", "")
	}
	for k, v := range lag {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, v, k.mirror, k.topic)
		ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, lost[k], k.mirror, k.topic)
	}
	for k, ms := range lagMs {
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, float64(ms)/1000, k.mirror, k.topic)
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
