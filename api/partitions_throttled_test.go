package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"kmirror/api"
	"kmirror/repo"
)

// TestThrottledTimeInDescribeAndStatus: the time a partition's copies
// waited for the mirror's replication throttle, as its checkpoints save
// it, shows in its describe rows (GET /v1/partitions and a topic's
// partition_rows, in ms) and, summed over the mirror, in the mirror's
// status (in seconds).
func TestThrottledTimeInDescribeAndStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders|payments")
	ctx := t.Context()
	for _, q := range []string{
		`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('i1', 1, now() + interval '1 hour')`,
		`UPDATE mirror_partitions SET lease_owner = 'i1', lease_session = 1, lease_epoch = 2, state = 'MIRRORING',
			src_next = 0, dst_next = 0 WHERE mirror = 'm1'`,
	} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The data plane's checkpoints: orders 0 waited 1.5 s, orders 2 250 ms,
	// payments 0 1 s; orders 1 was never held back.
	want := map[string]int64{"orders/0": 1500, "orders/1": 0, "orders/2": 250, "payments/0": 1000}
	var cps []repo.Checkpoint
	for _, c := range []struct {
		topic string
		part  int32
	}{{"orders", 0}, {"orders", 2}, {"payments", 0}} {
		cps = append(cps, repo.Checkpoint{Mirror: "m1", Topic: c.topic, Partition: c.part, Epoch: 2,
			SrcNext: 5, DstNext: 5, SourceEnd: -1, DestinationEnd: -1,
			ThrottledMs: want[fmt.Sprintf("%s/%d", c.topic, c.part)]})
	}
	if saved, err := repo.CheckpointsSave(ctx, e.pool, "i1", cps); err != nil || len(saved) != 3 {
		t.Fatalf("checkpoints: saved %v, %v", saved, err)
	}

	// rowsThrottled checks the throttled_ms of describe rows, as raw JSON:
	// an integer, present also where it is 0.
	rowsThrottled := func(where string, rows []map[string]json.RawMessage) {
		t.Helper()
		for _, row := range rows {
			var topic string
			var part int32
			if err := json.Unmarshal(row["topic"], &topic); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(row["partition"], &part); err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("%s/%d", topic, part)
			w, _ := json.Marshal(want[key])
			if got, ok := row["throttled_ms"]; !ok || string(got) != string(w) {
				t.Errorf("%s: %s throttled_ms %s (present %v), want %s", where, key, got, ok, w)
			}
		}
	}
	var page struct {
		Partitions []map[string]json.RawMessage `json:"partitions"`
	}
	ok(t, e.do(t, "GET", "/v1/partitions?mirror=m1", nil), http.StatusOK, &page)
	if len(page.Partitions) != 4 {
		t.Fatalf("%d describe rows, want 4", len(page.Partitions))
	}
	rowsThrottled("GET /v1/partitions", page.Partitions)
	var topic struct {
		PartitionRows []map[string]json.RawMessage `json:"partition_rows"`
	}
	ok(t, e.do(t, "GET", "/v1/mirrors/m1/topics/orders", nil), http.StatusOK, &topic)
	if len(topic.PartitionRows) != 3 {
		t.Fatalf("%d partition rows of orders, want 3", len(topic.PartitionRows))
	}
	rowsThrottled("GET /v1/mirrors/m1/topics/orders", topic.PartitionRows)

	var m api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/m1", nil), http.StatusOK, &m)
	if m.Status.ThrottledSeconds != 2.75 {
		t.Fatalf("GET /v1/mirrors/m1: throttled_seconds %v, want 2.75", m.Status.ThrottledSeconds)
	}
	var list api.MirrorList
	ok(t, e.do(t, "GET", "/v1/mirrors", nil), http.StatusOK, &list)
	if len(list.Mirrors) != 1 || list.Mirrors[0].Status.ThrottledSeconds != 2.75 {
		t.Fatalf("GET /v1/mirrors: %+v, want throttled_seconds 2.75", list.Mirrors)
	}
}
