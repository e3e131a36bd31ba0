package repo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// TestPartitionsForeignEnds: the stale ends of other instances' partitions
// are listed, and written only where the stored end is lower and has not
// changed for the given time; an instance's own partitions, fresh ends and
// rows another transaction holds are left alone. An instance that holds
// every partition reads no partition row.
func TestPartitionsForeignEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('a', 1, now() + interval '1 hour')`)
	exec(`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`)
	exec(`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 't', 'mirroring'), ('m', 'big', 'mirroring')`)
	exec(`INSERT INTO mirror_partitions (mirror, topic, partition, state, lease_owner, lease_epoch, lease_session)
		SELECT 'm', 'big', p, 'MIRRORING', 'a', 1, 1 FROM generate_series(0, 9999) p`)
	exec(`ANALYZE mirror_partitions`)

	// 'a' holds all 10,000 (the plan is checked in TestStaleForeignEndsPlan).
	if got, err := repo.PartitionsListStaleForeignEnds(ctx, pool, "a", 3*time.Second); err != nil || len(got) != 0 {
		t.Fatalf("a: %v, %v; want nothing", got, err)
	}

	// b holds t/0..4: 0 never had an end, 1 is stale and behind, 2 is
	// fresh, 3 is stale and ahead of the listing, 4 is stale and locked.
	exec(`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('b', 1, now() + interval '1 hour')`)
	exec(`INSERT INTO mirror_partitions (mirror, topic, partition, state, lease_owner, lease_epoch, lease_session,
			source_end_offset, source_end_at) VALUES
		('m', 't', 0, 'MIRRORING', 'b', 1, 1, NULL, NULL),
		('m', 't', 1, 'MIRRORING', 'b', 1, 1, 10, now() - interval '10 seconds'),
		('m', 't', 2, 'MIRRORING', 'b', 1, 1, 10, now()),
		('m', 't', 3, 'MIRRORING', 'b', 1, 1, 50, now() - interval '10 seconds'),
		('m', 't', 4, 'MIRRORING', 'b', 1, 1, 10, now() - interval '10 seconds')`)
	stale, err := repo.PartitionsListStaleForeignEnds(ctx, pool, "a", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(stale); got != "[{{m t 0} -1} {{m t 1} 10} {{m t 3} 50} {{m t 4} 10}]" {
		t.Fatalf("stale ends %s", got)
	}
	if got, err := repo.PartitionsListStaleForeignEnds(ctx, pool, "b", 3*time.Second); err != nil || len(got) != 10_000 {
		t.Fatalf("b sees %d stale ends of a's (%v), want 10000", len(got), err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM mirror_partitions WHERE mirror = 'm' AND topic = 't' AND partition = 4 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	id := func(p int32) repo.PartitionID { return repo.PartitionID{Mirror: "m", Topic: "t", Partition: p} }
	n, err := repo.PartitionsSetForeignEnds(ctx, pool, "a", 3*time.Second, []repo.StaleEnd{
		{ID: id(0), SourceEnd: 7}, {ID: id(1), SourceEnd: 20}, {ID: id(2), SourceEnd: 20},
		{ID: id(3), SourceEnd: 40}, {ID: id(4), SourceEnd: 20},
		{ID: repo.PartitionID{Mirror: "m", Topic: "big", Partition: 0}, SourceEnd: 20}, // a's own
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d rows written, want 2 (t/0 and t/1)", n)
	}
	_ = tx.Rollback(ctx)
	rows, err := pool.Query(ctx, `SELECT topic || '/' || partition, coalesce(source_end_offset, -1),
			source_end_at IS NOT NULL AND source_end_at > now() - interval '1 second'
		FROM mirror_partitions WHERE (topic, partition) IN (('t', 0), ('t', 1), ('t', 2), ('t', 3), ('t', 4), ('big', 0))
		ORDER BY topic DESC, partition`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var k string
		var end int64
		var fresh bool
		if err := rows.Scan(&k, &end, &fresh); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s=%d/%v", k, end, fresh))
	}
	want := "[t/0=7/true t/1=20/true t/2=10/true t/3=50/false t/4=10/false big/0=-1/false]"
	if fmt.Sprint(got) != want {
		t.Fatalf("ends %v, want %s", got, want)
	}
}
