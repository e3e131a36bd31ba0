package service_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
)

// published is what the relay would leave in __mirror_state: the latest
// value of every key of the outbox (a tombstone drops the key).
func published(t *testing.T, pool *pgxpool.Pool) map[string][]byte {
	t.Helper()
	rows, err := repo.OutboxList(t.Context(), pool, repo.OutboxListParams{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	latest := map[string][]byte{}
	for _, r := range rows {
		if r.Value == nil {
			delete(latest, r.Key)
		} else {
			latest[r.Key] = r.Value
		}
	}
	return latest
}

// TestRestoreKeepsDestinationNames: a topic record carries its destination
// name, and a restore keeps it; a record published before records carried
// it is named by its restored mirror's topic.name.prefix. restore --verify
// looks the destination's ends up by destination name.
func TestRestoreKeepsDestinationNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	catalog := service.CatalogFunc(func(context.Context, kafkaconn.Config) (map[string]int32, error) {
		return map[string]int32{"orders": 2, "payments": 1}, nil
	})
	newControl := func(pool *pgxpool.Pool) *service.Control {
		svc, err := service.NewControl(service.Config{Pool: pool, Catalog: catalog})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	pool := testdb.Pool(t)
	svc := newControl(pool)
	for name, cfg := range map[string]map[string]string{"east": {service.CfgTopicNamePrefix: "east."}, "plain": nil} {
		if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: name, Source: service.SourceInput{BootstrapServers: "h:1"},
			Config: cfg}, service.WriteOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.AddTopics(ctx, "east", service.AddTopicsInput{Topic: "orders|payments"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddTopics(ctx, "plain", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	// Every partition checkpointed at 5, as the relay would publish it.
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET state = 'MIRRORING', src_next = 5, dst_next = 5`); err != nil {
		t.Fatal(err)
	}
	latest := published(t, pool)
	parts, err := repo.PartitionsList(ctx, pool, repo.PartitionsListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		raw, err := json.Marshal(service.PartitionRecordOf(p))
		if err != nil {
			t.Fatal(err)
		}
		latest[service.PartitionKey(p.Mirror, p.Topic, p.Partition)] = raw
	}

	var rec service.TopicRecord
	if err := json.Unmarshal(latest[service.TopicKey("east", "orders")], &rec); err != nil || rec.DestinationTopic != "east.orders" {
		t.Fatalf("published topic record %+v (%v), want destination_topic east.orders", rec, err)
	}
	// A record from before records kept the name: the prefix names it.
	var old map[string]any
	if err := json.Unmarshal(latest[service.TopicKey("east", "payments")], &old); err != nil {
		t.Fatal(err)
	}
	delete(old, "destination_topic")
	if latest[service.TopicKey("east", "payments")], err = json.Marshal(old); err != nil {
		t.Fatal(err)
	}

	fresh := testdb.Pool(t)
	restored := newControl(fresh)
	res, err := restored.Restore(ctx, latest)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mirrors != 2 || res.Topics != 3 || res.Partitions != 5 {
		t.Fatalf("restore = %+v", res)
	}
	for key, want := range map[[2]string]string{{"east", "orders"}: "east.orders", {"east", "payments"}: "east.payments",
		{"plain", "orders"}: "orders"} {
		got, err := repo.TopicsGet(ctx, fresh, key[0], key[1])
		if err != nil || got.DestTopic != want {
			t.Errorf("restored %s/%s: destination %q (%v), want %q", key[0], key[1], got.DestTopic, err, want)
		}
	}

	// --verify reads the destination's ends by destination name: both
	// mirrors' orders are there, each under its own name.
	snap, err := service.DecodeState(latest)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]map[int32]int64{"east.orders": {0: 5, 1: 5}, "east.payments": {0: 5}, "orders": {0: 5, 1: 5}}
	rep, err := restored.VerifyRestore(ctx, snap, ends)
	if err != nil || len(rep.Differences) != 0 {
		t.Fatalf("verify of a good restore: %v\n%s\n%s", err, strings.Join(rep.Lines, "\n"), strings.Join(rep.Differences, "\n"))
	}
	// Without east's topics on the destination, east's partitions are
	// missing there (and plain's orders is not taken for east's).
	delete(ends, "east.orders")
	delete(ends, "east.payments")
	rep, err = restored.VerifyRestore(ctx, snap, ends)
	want := []string{"destination: east/orders/0: the destination has no such partition",
		"destination: east/orders/1: the destination has no such partition",
		"destination: east/payments/0: the destination has no such partition"}
	if err != nil || !slices.Equal(rep.Differences, want) {
		t.Fatalf("verify without east's topics: %v\n%q\nwant %q", err, rep.Differences, want)
	}
	// A destination name changed by hand is a difference.
	if _, err := fresh.Exec(ctx, `UPDATE mirror_topics SET dest_topic = 'west.orders' WHERE mirror = 'east' AND topic = 'orders'`); err != nil {
		t.Fatal(err)
	}
	ends["west.orders"] = map[int32]int64{0: 5, 1: 5}
	ends["east.payments"] = map[int32]int64{0: 5}
	rep, err = restored.VerifyRestore(ctx, snap, ends)
	want = []string{"topic names: east/orders: destination topic east.orders in __mirror_state, west.orders in the database"}
	if err != nil || !slices.Equal(rep.Differences, want) {
		t.Fatalf("verify of a renamed topic: %v\n%q\nwant %q", err, rep.Differences, want)
	}
}
