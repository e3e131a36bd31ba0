package api_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"kmirror/api"
)

// TestMirrorStatus: GET /v1/mirrors and /v1/mirrors/{m} summarize each
// mirror's topics and partitions; /v1/instances counts live leases.
func TestMirrorStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders|payments")
	created := e.createMirror(t, "m2")
	if created.Status.States != (api.PartitionStateCounts{}) || created.Status.Topics != 0 {
		t.Fatalf("a new mirror's status: %+v", created.Status)
	}
	for _, sql := range []string{
		`INSERT INTO instances (id, hostname, version, session_epoch, session_expires_at) VALUES
			('i1', 'h', 'v', 1, now() + interval '1 minute'), ('i2', 'h', 'v', 1, now() - interval '1 second')`,
		// orders: two MIRRORING (lag 2 and 0), one FAILED (lag 5, erroring);
		// payments: UNKNOWN, no known end.
		`UPDATE mirror_partitions SET state = 'MIRRORING', src_next = 8, dst_next = 8, source_end_offset = 10,
			lease_owner = 'i1', lease_session = 1 WHERE topic = 'orders' AND partition = 0`,
		`UPDATE mirror_partitions SET state = 'MIRRORING', src_next = 8, dst_next = 8, source_end_offset = 8,
			lease_owner = 'i1', lease_session = 1 WHERE topic = 'orders' AND partition = 1`,
		`UPDATE mirror_partitions SET state = 'FAILED', error = 'diverged', source_end_offset = 5,
			lease_owner = 'i2', lease_session = 1 WHERE topic = 'orders' AND partition = 2`,
	} {
		if _, err := e.pool.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	want := api.MirrorStatus{Topics: 2, Partitions: 4, States: api.PartitionStateCounts{Mirroring: 2, Failed: 1, Unknown: 1},
		Lag: 7, Erroring: 1}
	// max_lag_ms: orders/1 is caught up (0), orders/0's first uncopied
	// record is 90 s old; the others' are unknown.
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET oldest_uncopied_src = 8,
		oldest_uncopied_at = now() - interval '90 seconds' WHERE topic = 'orders' AND partition = 0`); err != nil {
		t.Fatal(err)
	}
	maxLag := func(st *api.MirrorStatus) {
		t.Helper()
		if l := st.MaxLagMs; l == nil || *l < 90_000 || *l > 150_000 {
			t.Fatalf("max_lag_ms %v, want about 90 s", l)
		}
		st.MaxLagMs = nil
	}
	var m api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/m1", nil), http.StatusOK, &m)
	maxLag(&m.Status)
	if !reflect.DeepEqual(m.Status, want) {
		t.Fatalf("status of m1 %+v, want %+v", m.Status, want)
	}
	var list api.MirrorList
	ok(t, e.do(t, "GET", "/v1/mirrors", nil), http.StatusOK, &list)
	if len(list.Mirrors) != 2 {
		t.Fatalf("list %+v", list)
	}
	maxLag(&list.Mirrors[0].Status)
	if !reflect.DeepEqual(list.Mirrors[0].Status, want) {
		t.Fatalf("list %+v", list)
	}
	// An empty mirror has zeros and an empty (not null) states object.
	r := e.do(t, "GET", "/v1/mirrors/m2", nil)
	var raw struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	for key, val := range map[string]string{"topics": "0", "partitions": "0", "states": "{}", "lag": "0",
		"erroring": "0", "records_per_sec": "0", "throttled_seconds": "0", "max_lag_ms": "null"} {
		if string(raw.Status[key]) != val {
			t.Fatalf("status.%s of m2 is %s, want %s: %s", key, raw.Status[key], val, r.body)
		}
	}

	var instances api.InstanceList
	ok(t, e.do(t, "GET", "/v1/instances", nil), http.StatusOK, &instances)
	got := map[string]int{}
	for _, in := range instances.Instances {
		got[in.ID] = in.Leases
	}
	// i2's session expired: its lease does not count.
	if want := map[string]int{"i1": 2, "i2": 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("leases %v, want %v", got, want)
	}
}
