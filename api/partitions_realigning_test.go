package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"kmirror/api"
)

// TestRealigningInDescribeAndStatus: a partition whose owner took its lease
// under an epoch it has not aligned under yet is re-aligning; its describe
// rows (GET /v1/partitions and a topic's partition_rows) say so, and the
// mirror's status counts it. A partition in another state, or nobody owns,
// is not re-aligning whatever its epochs; once aligned under its lease's
// epoch, none is.
func TestRealigningInDescribeAndStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")
	ctx := t.Context()
	exec := func(q string) {
		t.Helper()
		if _, err := e.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// i1 took every lease under epoch 2. orders 0 was last aligned under
	// epoch 1 and still MIRRORING: re-aligning. orders 1 is STOPPED with
	// the same epochs, orders 2 MIRRORING but its lease released.
	exec(`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('i1', 1, now() + interval '1 hour')`)
	exec(`UPDATE mirror_partitions SET lease_owner = 'i1', lease_session = 1, lease_epoch = 2, aligned_epoch = 1,
		state = 'MIRRORING', src_next = 0, dst_next = 0 WHERE mirror = 'm1'`)
	exec(`UPDATE mirror_partitions SET state = 'STOPPED' WHERE mirror = 'm1' AND partition = 1`)
	exec(`UPDATE mirror_partitions SET lease_owner = NULL, lease_session = NULL WHERE mirror = 'm1' AND partition = 2`)

	check := func(want map[int32]bool) {
		t.Helper()
		rowsRealigning := func(where string, rows []map[string]json.RawMessage) {
			t.Helper()
			if len(rows) != len(want) {
				t.Fatalf("%s: %d rows, want %d", where, len(rows), len(want))
			}
			for _, row := range rows {
				var part int32
				if err := json.Unmarshal(row["partition"], &part); err != nil {
					t.Fatal(err)
				}
				// Present also where false.
				w, _ := json.Marshal(want[part])
				if got, ok := row["realigning"]; !ok || string(got) != string(w) {
					t.Errorf("%s: orders/%d realigning %s (present %v), want %s", where, part, got, ok, w)
				}
			}
		}
		var page struct {
			Partitions []map[string]json.RawMessage `json:"partitions"`
		}
		ok(t, e.do(t, "GET", "/v1/partitions?mirror=m1", nil), http.StatusOK, &page)
		rowsRealigning("GET /v1/partitions", page.Partitions)
		var topic struct {
			PartitionRows []map[string]json.RawMessage `json:"partition_rows"`
		}
		ok(t, e.do(t, "GET", "/v1/mirrors/m1/topics/orders", nil), http.StatusOK, &topic)
		rowsRealigning("GET /v1/mirrors/m1/topics/orders", topic.PartitionRows)

		n := 0
		for _, r := range want {
			if r {
				n++
			}
		}
		var raw struct {
			Status map[string]json.RawMessage `json:"status"`
		}
		ok(t, e.do(t, "GET", "/v1/mirrors/m1", nil), http.StatusOK, &raw)
		if w, _ := json.Marshal(n); string(raw.Status["realigning"]) != string(w) {
			t.Errorf("GET /v1/mirrors/m1: status.realigning %s, want %s", raw.Status["realigning"], w)
		}
		var list api.MirrorList
		ok(t, e.do(t, "GET", "/v1/mirrors", nil), http.StatusOK, &list)
		if len(list.Mirrors) != 1 {
			t.Fatalf("GET /v1/mirrors: %d mirrors, want 1", len(list.Mirrors))
		}
		if got := list.Mirrors[0].Status.Realigning; got != n {
			t.Errorf("GET /v1/mirrors: status.realigning %d, want %d", got, n)
		}
	}
	check(map[int32]bool{0: true, 1: false, 2: false})

	// Alignment done under epoch 2.
	exec(`UPDATE mirror_partitions SET aligned_epoch = lease_epoch WHERE mirror = 'm1'`)
	check(map[int32]bool{0: false, 1: false, 2: false})
}
