package repo_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// statusWorld has mirror a (topics t1 with 3 partitions, t2 with 1), mirror
// b (t3 with 1) and mirror c with no topics. Instances: i1 and i3 with live
// sessions, i2 with an expired one. Lag per partition: a/t1 5, 0 (end
// behind src_next: floored), 7 (no checkpoint yet); a/t2 unknown (no end);
// b/t3 4.
func statusWorld(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testdb.Pool(t)
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('a', 'h:1'), ('b', 'h:1'), ('c', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES
			('a', 't1', 'mirroring'), ('a', 't2', 'mirroring'), ('b', 't3', 'paused')`,
		`INSERT INTO instances (id, hostname, version, session_epoch, session_expires_at) VALUES
			('i1', 'h', 'v', 3, now() + interval '1 minute'),
			('i2', 'h', 'v', 1, now() - interval '1 second'),
			('i3', 'h', 'v', 2, now() + interval '1 minute')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state, error, src_next, dst_next, source_end_offset,
				lease_owner, lease_session) VALUES
			('a', 't1', 0, 'MIRRORING', NULL, 10, 10, 15, 'i1', 3),
			('a', 't1', 1, 'MIRRORING', NULL, 20, 20, 18, 'i1', 3),
			('a', 't1', 2, 'FAILED', 'boom', NULL, NULL, 7, 'i1', 2),
			('a', 't2', 0, NULL, '', NULL, NULL, NULL, 'i2', 1),
			('b', 't3', 0, 'PAUSED', 'source unreachable', 5, 5, 9, 'i3', 2)`,
		// Lag in time: a/t1/0's first uncopied record is an hour old; b/t3's
		// was read for an offset its checkpoint has left (unknown).
		`UPDATE mirror_partitions SET oldest_uncopied_src = 10, oldest_uncopied_at = now() - interval '1 hour'
			WHERE mirror = 'a' AND topic = 't1' AND partition = 0`,
		`UPDATE mirror_partitions SET oldest_uncopied_src = 4, oldest_uncopied_at = now() - interval '1 day'
			WHERE mirror = 'b'`,
	} {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return pool
}

func TestMirrorsStatus(t *testing.T) {
	t.Parallel()
	pool := statusWorld(t)
	got, err := repo.MirrorsStatus(t.Context(), pool, "")
	if err != nil {
		t.Fatal(err)
	}
	// The largest known lag in time, an hour and what the test took.
	if m := got[1].MaxLagMs; m == nil || *m < 3_600_000 || *m > 3_660_000 {
		t.Fatalf("MIRRORING max lag in time %v ms, want about an hour", m)
	}
	got[1].MaxLagMs = nil
	want := []repo.MirrorStateCount{
		{Mirror: "a", Topics: 2, State: "FAILED", Partitions: 1, Lag: 7, Erroring: 1},
		{Mirror: "a", Topics: 2, State: "MIRRORING", Partitions: 2, Lag: 5},
		{Mirror: "a", Topics: 2, State: "UNKNOWN", Partitions: 1},
		{Mirror: "b", Topics: 1, State: "PAUSED", Partitions: 1, Lag: 4, Erroring: 1},
		{Mirror: "c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MirrorsStatus:\n got %+v\nwant %+v", got, want)
	}
	got, err = repo.MirrorsStatus(t.Context(), pool, "b")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want[3:4]) {
		t.Fatalf("MirrorsStatus(b): %+v, want %+v", got, want[3:4])
	}
}

func TestPartitionsProgress(t *testing.T) {
	t.Parallel()
	pool := statusWorld(t)
	got, err := repo.PartitionsProgress(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	// a/t1's largest lag in time, an hour (statusWorld).
	if m := got[0].MaxLagMs; m == nil || *m < 3_600_000 || *m > 3_660_000 {
		t.Fatalf("a/t1 max lag in time %v ms, want about an hour", m)
	}
	got[0].MaxLagMs = nil
	want := []repo.TopicProgress{
		{Mirror: "a", Topic: "t1", SrcNext: 30, Lag: 12},
		{Mirror: "a", Topic: "t2"},
		{Mirror: "b", Topic: "t3", SrcNext: 5, Lag: 4},
		{Mirror: "c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PartitionsProgress:\n got %+v\nwant %+v", got, want)
	}
}

// TestInstancesListLeases: a lease counts only under the owner's current,
// unexpired session, and an instance is live while its session is.
func TestInstancesListLeases(t *testing.T) {
	t.Parallel()
	pool := statusWorld(t)
	list, err := repo.InstancesList(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	got, live := map[string]int{}, map[string]bool{}
	for _, in := range list {
		got[in.ID], live[in.ID] = in.Leases, in.Live
	}
	// i1: a/t1/2 is under its older session 2; i2: its session expired.
	if want := map[string]int{"i1": 2, "i2": 0, "i3": 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("leases %v, want %v", got, want)
	}
	if want := map[string]bool{"i1": true, "i2": false, "i3": true}; !reflect.DeepEqual(live, want) {
		t.Fatalf("live %v, want %v", live, want)
	}
}
