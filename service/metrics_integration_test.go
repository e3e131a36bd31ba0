package service

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"kmirror/internal/testing/testdb"
)

func TestStateCollector(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	_, err := pool.Exec(context.Background(), `
		INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1');
		INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 'orders', 'mirroring');
		INSERT INTO mirror_partitions (mirror, topic, partition, state, src_next, dst_next, source_end_offset, lost_records, error) VALUES
			('m', 'orders', 0, 'MIRRORING', 10, 10, 15, 0, NULL),
			('m', 'orders', 1, 'MIRRORING', 20, 20, 20, 3, 'fetching from the source has failed since …'),
			('m', 'orders', 2, NULL, NULL, NULL, 7, 0, NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStateCollector(pool))
	want := `
# HELP kmirror_lag_records Source end offset minus the next source offset to mirror, summed over the topic's partitions.
# TYPE kmirror_lag_records gauge
kmirror_lag_records{mirror="m",topic="orders"} 12
# HELP kmirror_lost_records_total Source records removed by retention before they were mirrored.
# TYPE kmirror_lost_records_total counter
kmirror_lost_records_total{mirror="m",topic="orders"} 3
# HELP kmirror_partition_lag_records Source end offset minus the next source offset to mirror, per partition; exported only while the deployment has at most 1000 partitions.
# TYPE kmirror_partition_lag_records gauge
kmirror_partition_lag_records{mirror="m",partition="0",topic="orders"} 5
kmirror_partition_lag_records{mirror="m",partition="1",topic="orders"} 0
kmirror_partition_lag_records{mirror="m",partition="2",topic="orders"} 7
# HELP kmirror_partitions Mirror partitions by state.
# TYPE kmirror_partitions gauge
kmirror_partitions{mirror="m",state="FAILED",topic="orders"} 0
kmirror_partitions{mirror="m",state="MIRRORING",topic="orders"} 2
kmirror_partitions{mirror="m",state="PAUSED",topic="orders"} 0
kmirror_partitions{mirror="m",state="PAUSING",topic="orders"} 0
kmirror_partitions{mirror="m",state="PREPARING",topic="orders"} 0
kmirror_partitions{mirror="m",state="STOPPED",topic="orders"} 0
kmirror_partitions{mirror="m",state="STOPPING",topic="orders"} 0
kmirror_partitions{mirror="m",state="UNKNOWN",topic="orders"} 1
# HELP kmirror_partitions_erroring Mirror partitions with an error, FAILED or still retrying in their state (a source that cannot be reached, for example).
# TYPE kmirror_partitions_erroring gauge
kmirror_partitions_erroring{mirror="m",state="FAILED",topic="orders"} 0
kmirror_partitions_erroring{mirror="m",state="MIRRORING",topic="orders"} 1
kmirror_partitions_erroring{mirror="m",state="PAUSED",topic="orders"} 0
kmirror_partitions_erroring{mirror="m",state="PAUSING",topic="orders"} 0
kmirror_partitions_erroring{mirror="m",state="PREPARING",topic="orders"} 0
kmirror_partitions_erroring{mirror="m",state="STOPPED",topic="orders"} 0
kmirror_partitions_erroring{mirror="m",state="STOPPING",topic="orders"} 0
kmirror_partitions_erroring{mirror="m",state="UNKNOWN",topic="orders"} 0
# HELP kmirror_state_scrape_ok 1 when the partition state and outbox queries succeeded.
# TYPE kmirror_state_scrape_ok gauge
kmirror_state_scrape_ok 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kmirror_lag_records", "kmirror_lost_records_total", "kmirror_partition_lag_records",
		"kmirror_partitions", "kmirror_partitions_erroring", "kmirror_state_scrape_ok"); err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	// Lag in time: no series while no partition's is known; then the
	// largest over the topic's partitions, from the database's clock.
	if _, err := pool.Exec(context.Background(), `
		UPDATE mirror_partitions SET oldest_uncopied_src = 10, oldest_uncopied_at = now() - interval '90 seconds'
		WHERE partition = 0`); err != nil {
		t.Fatal(err)
	}
	if got := gauge("kmirror_replication_lag_seconds"); got < 90 || got > 3000 {
		t.Errorf("kmirror_replication_lag_seconds = %v, want about 90", got)
	}
	// The outbox backlog: unpublished rows and the age of the oldest.
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO outbox (mirror, key, value, created_at, published_at) VALUES
			('m', 'mirror/m', '{}', now() - interval '1 hour', now()),
			('m', 'topic/m/orders', '{}', now() - interval '90 seconds', NULL),
			('m', 'topic/m/orders', NULL, now(), NULL)`); err != nil {
		t.Fatal(err)
	}
	if got := gauge("kmirror_outbox_unpublished_rows"); got < 2 {
		t.Errorf("kmirror_outbox_unpublished_rows = %v, want at least the 2 inserted", got)
	}
	if got := gauge("kmirror_outbox_oldest_unpublished_age_seconds"); got < 90 || got > 3000 {
		t.Errorf("kmirror_outbox_oldest_unpublished_age_seconds = %v, want about 90", got)
	}
}
