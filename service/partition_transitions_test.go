package service_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/service"
)

// TestTransitionRecordMatchesGo: a state change writes the row, its event
// and its __mirror_state record in one statement, the record built in SQL;
// decoded as restore decodes it, it must equal the record Go builds from
// the stored row (PartitionRecordOf), through a change that moves the
// checkpoint and one that keeps it and sets an error.
func TestTransitionRecordMatchesGo(t *testing.T) {
	t.Parallel()
	svc, pool := leasedOrders(t, 1)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET lost_records = 2 WHERE partition = 1`); err != nil {
		t.Fatal(err)
	}
	// An offset map, so the record carries the last mirrored offsets.
	if _, err := pool.Exec(ctx, `INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
		VALUES ('m1', 'orders', 1, 0, 0, 30), ('m1', 'orders', 1, 32, 30, 7)`); err != nil {
		t.Fatal(err)
	}
	src, dst := int64(40), int64(38)
	steps := []service.PartitionTransition{
		{From: service.StateUnknown, To: service.StatePreparing},
		{From: service.StatePreparing, To: service.StateMirroring, SrcNext: &src, DstNext: &dst, LostRecordsAdd: 3, Reason: "aligned"},
		{From: service.StateMirroring, To: service.StateFailed, Error: "produce failed", Retryable: true, RetryAttempt: 1},
	}
	for _, st := range steps {
		st.Mirror, st.Topic, st.Partition, st.Owner, st.Epoch = "m1", "orders", 1, "i1", 4
		row, err := svc.TransitionPartition(ctx, st)
		if err != nil {
			t.Fatalf("%s → %s: %v", st.From, st.To, err)
		}
		var raw []byte
		if err := pool.QueryRow(ctx, `SELECT value FROM outbox WHERE key = $1 ORDER BY id DESC LIMIT 1`,
			service.PartitionKey("m1", "orders", 1)).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var got service.PartitionRecord
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%s → %s: record %s: %v", st.From, st.To, raw, err)
		}
		want := service.PartitionRecordOf(row)
		if want.LastMirroredSrc == nil || *want.LastMirroredSrc != 38 || *want.LastMirroredDst != 36 {
			t.Errorf("%s → %s: last mirrored %v → %v, want 38 → 36 (the end of the map)", st.From, st.To,
				want.LastMirroredSrc, want.LastMirroredDst)
		}
		if !got.UpdatedAt.Equal(want.UpdatedAt) {
			t.Errorf("%s → %s: updated_at %v, want %v", st.From, st.To, got.UpdatedAt, want.UpdatedAt)
		}
		got.UpdatedAt = want.UpdatedAt
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Errorf("%s → %s: record\n got  %s\n want %s", st.From, st.To, gj, wj)
		}
		var kind string
		var data []byte
		if err := pool.QueryRow(ctx, `SELECT kind, data FROM events WHERE topic = 'orders' AND partition = 1 ORDER BY id DESC LIMIT 1`).Scan(&kind, &data); err != nil {
			t.Fatal(err)
		}
		var ev struct{ From, To string }
		if err := json.Unmarshal(data, &ev); err != nil || kind != service.EventPartitionState || ev.From != st.From.String() || ev.To != st.To.String() {
			t.Errorf("%s → %s: event %s %s (%v)", st.From, st.To, kind, data, err)
		}
	}
	// A transition from a state the row is not in writes nothing.
	if _, err := svc.TransitionPartition(ctx, service.PartitionTransition{Mirror: "m1", Topic: "orders", Partition: 1,
		Owner: "i1", Epoch: 4, From: service.StateMirroring, To: service.StatePausing}); err != service.ErrLeaseLost {
		t.Fatalf("a transition from the wrong state: %v, want ErrLeaseLost", err)
	}
}

// TestTransitionPartitionsEachStandsAlone: in one call, an invalid step
// and a lost lease fail alone, and the valid changes beside them land.
func TestTransitionPartitionsEachStandsAlone(t *testing.T) {
	t.Parallel()
	svc, pool := leasedOrders(t, 0, 1, 2)
	ctx := t.Context()
	ts := []service.PartitionTransition{
		{Partition: 0, Epoch: 4, From: service.StateUnknown, To: service.StatePreparing},
		{Partition: 1, Epoch: 4, From: service.StateUnknown, To: service.StateMirroring}, // not a step
		{Partition: 2, Epoch: 3, From: service.StateUnknown, To: service.StatePreparing}, // stale epoch
		{Partition: 1, Epoch: 4, From: service.StateUnknown, To: service.StatePreparing},
	}
	for i := range ts {
		ts[i].Mirror, ts[i].Topic, ts[i].Owner, ts[i].Retryable = "m1", "orders", "i1", true
	}
	rows, errs := svc.TransitionPartitions(ctx, ts)
	var invalid *service.InvalidTransitionError
	if errs[0] != nil || rows[0].State != service.StatePreparing || rows[0].Partition != 0 {
		t.Errorf("valid change: %+v, %v", rows[0], errs[0])
	}
	if !errors.As(errs[1], &invalid) || rows[1].Mirror != "" {
		t.Errorf("invalid step: %+v, %v; want an InvalidTransitionError", rows[1], errs[1])
	}
	if errs[2] != service.ErrLeaseLost {
		t.Errorf("stale epoch: %v, want ErrLeaseLost", errs[2])
	}
	if errs[3] != nil || rows[3].State != service.StatePreparing || rows[3].Partition != 1 {
		t.Errorf("valid change after an invalid one: %+v, %v", rows[3], errs[3])
	}
	var states string
	if err := pool.QueryRow(ctx, `SELECT string_agg(partition || '=' || coalesce(state, '-'), ',' ORDER BY partition)
		FROM mirror_partitions WHERE mirror = 'm1' AND topic = 'orders' AND partition < 3`).Scan(&states); err != nil {
		t.Fatal(err)
	}
	if states != "0=PREPARING,1=PREPARING,2=-" {
		t.Errorf("stored states %s", states)
	}
}

// leasedOrders is mirror m1 with topic orders added, the given partitions
// leased by instance i1 at epoch 4, and the workers' face over it.
func leasedOrders(t *testing.T, partitions ...int32) (*service.Workers, *pgxpool.Pool) {
	t.Helper()
	svc, pool := newServiceWithMirror(t)
	ctx := t.Context()
	if _, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('i1', 1, now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET lease_owner = 'i1', lease_session = 1, lease_epoch = 4
		WHERE mirror = 'm1' AND topic = 'orders' AND partition = ANY($1)`, partitions); err != nil {
		t.Fatal(err)
	}
	w, err := service.NewWorkers(service.WorkersConfig{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return w, pool
}
