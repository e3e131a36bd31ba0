package service_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"kmirror/internal/testing/testdb"
	"kmirror/service"
)

// TestListPartitionsTopicFilter: the topic pattern is RE2 matched against
// whole names, across mirrors when no mirror is given, and combines with
// the state filter; only the matching topics' rows come back.
func TestListPartitionsTopicFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('a', 'h:1'), ('b', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES
			('a', 'orders', 'mirroring'), ('a', 'orders.v2', 'mirroring'), ('a', 'payments', 'mirroring'), ('b', 'orders-eu', 'mirroring')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state) VALUES
			('a', 'orders', 0, 'MIRRORING'), ('a', 'orders', 1, 'FAILED'), ('a', 'orders.v2', 0, 'MIRRORING'),
			('a', 'payments', 0, 'MIRRORING'), ('b', 'orders-eu', 0, 'PAUSED')`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		f    service.PartitionFilter
		want []string
	}{
		{service.PartitionFilter{Mirror: "a", Topic: "orders"}, []string{"a/orders/0", "a/orders/1"}},
		{service.PartitionFilter{Mirror: "a", Topic: `orders.*`}, []string{"a/orders/0", "a/orders/1", "a/orders.v2/0"}},
		{service.PartitionFilter{Topic: `orders.*`}, []string{"a/orders/0", "a/orders/1", "a/orders.v2/0", "b/orders-eu/0"}},
		{service.PartitionFilter{Topic: `orders|payments`, State: "MIRRORING"}, []string{"a/orders/0", "a/payments/0"}},
		{service.PartitionFilter{Mirror: "b", Topic: "payments"}, nil},
		{service.PartitionFilter{Topic: "nothing"}, nil},
	} {
		rows, err := svc.ListPartitions(ctx, c.f)
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s/%s/%d", r.Mirror, r.Topic, r.Partition))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v: got %v, want %v", c.f, got, c.want)
		}
	}
}

// BenchmarkListPartitionsOneTopic: describe of one 100-partition topic in
// a mirror of 10,000 partitions (100 topics), and of the whole mirror for
// comparison. Only the matching topic's rows are read.
//
//	go test ./service -run '^$' -bench ListPartitions -benchtime=20x
func BenchmarkListPartitionsOneTopic(b *testing.B) {
	ctx := context.Background()
	pool := testdb.Pool(b)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('big', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) SELECT 'big', 't' || g, 'mirroring' FROM generate_series(1, 100) g`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state, src_next, dst_next, source_end_offset)
			SELECT 'big', 't' || g, p, 'MIRRORING', 10, 10, 12 FROM generate_series(1, 100) g, generate_series(0, 99) p`,
		`ANALYZE mirror_partitions`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		f    service.PartitionFilter
		rows int
	}{
		{"one-topic", service.PartitionFilter{Mirror: "big", Topic: "t42"}, 100},
		{"whole-mirror", service.PartitionFilter{Mirror: "big"}, 10_000},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				rows, err := svc.ListPartitions(ctx, c.f)
				if err != nil || len(rows) != c.rows {
					b.Fatalf("%d rows, err %v; want %d", len(rows), err, c.rows)
				}
			}
		})
	}
}
