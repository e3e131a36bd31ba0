package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"kmirror/service"
)

// TestLastMirroredInDescribeAndEvents: a partition that reaches STOPPED
// keeps the offsets of its last copied record, the end of its offset map
// (not the checkpoint, which here has moved past markers), in its describe
// row and in the STOPPED event's data and message; a partition that copied
// nothing has them null.
func TestLastMirroredInDescribeAndEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")
	ctx := t.Context()
	// A worker would write these; SQL stands in for it. Partition 1 copied
	// source 0..999 → 0..999, then 1005..1234 → 1000..1229 after an aborted
	// transaction, and its checkpoint is past a commit marker.
	for _, q := range []string{
		`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('i1', 1, now() + interval '1 hour')`,
		`UPDATE mirror_partitions SET lease_owner = 'i1', lease_session = 1, lease_epoch = 2, state = 'STOPPING',
			src_next = 1236, dst_next = 1230 WHERE mirror = 'm1' AND partition IN (0, 1)`,
		`INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
			VALUES ('m1', 'orders', 1, 0, 0, 1000), ('m1', 'orders', 1, 1005, 1000, 230)`,
	} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int32{0, 1} {
		if _, err := e.workers.TransitionPartition(ctx, service.PartitionTransition{Mirror: "m1", Topic: "orders",
			Partition: p, Owner: "i1", Epoch: 2, From: service.StateStopping, To: service.StateStopped,
			Reason: "topic writable"}); err != nil {
			t.Fatal(err)
		}
	}

	r := e.do(t, "GET", "/v1/partitions?mirror=m1", nil)
	var rows struct {
		Partitions []map[string]json.RawMessage `json:"partitions"`
	}
	ok(t, r, http.StatusOK, &rows)
	want := map[string][2]string{"0": {"null", "null"}, "1": {"1234", "1229"}, "2": {"null", "null"}}
	for _, row := range rows.Partitions {
		w := want[string(row["partition"])]
		src, okSrc := row["last_mirrored_source_offset"]
		dst, okDst := row["last_mirrored_destination_offset"]
		if !okSrc || !okDst || string(src) != w[0] || string(dst) != w[1] {
			t.Fatalf("partition %s: last mirrored %s → %s, want %s → %s", row["partition"], src, dst, w[0], w[1])
		}
	}

	msgs := readSSE(t, e, "?since=0&mirror=m1", "", 4)
	var stopped int
	for _, m := range msgs {
		if m.event != service.EventPartitionState {
			continue
		}
		var ev struct {
			Partition int32                      `json:"partition"`
			Message   string                     `json:"message"`
			Data      map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatal(err)
		}
		wantSrc, wantDst, note := "null", "null", "; nothing was mirrored"
		if ev.Partition == 1 {
			wantSrc, wantDst, note = "1234", "1229", "; last mirrored source offset 1234 → destination offset 1229"
		}
		if string(ev.Data["to"]) != `"STOPPED"` || string(ev.Data["last_mirrored_source_offset"]) != wantSrc ||
			string(ev.Data["last_mirrored_destination_offset"]) != wantDst || !strings.HasSuffix(ev.Message, note) {
			t.Fatalf("STOPPED event %s", m.data)
		}
		stopped++
	}
	if stopped != 2 {
		t.Fatalf("%d STOPPED events in %v, want 2", stopped, msgs)
	}
}
