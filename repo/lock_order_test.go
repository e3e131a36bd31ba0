package repo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// TestBulkPartitionWritesNeverDeadlock runs the instance's bulk writers of
// mirror_partitions at once, each given its rows in a different order, as
// the checkpointer, the offsets refresher and the lease manager do: since
// every one locks in primary-key order, none may fail with a deadlock
// (SQLSTATE 40P01).
func TestBulkPartitionWritesNeverDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	const parts = 300
	for _, sql := range []string{
		`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('a', 1, now() + interval '1 hour')`,
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) SELECT 'm', 't' || g, 'mirroring' FROM generate_series(0, 2) g`,
		fmt.Sprintf(`INSERT INTO mirror_partitions (mirror, topic, partition, state, lease_owner, lease_epoch, lease_session)
			SELECT 'm', 't' || g, p, 'MIRRORING', 'a', 1, 1 FROM generate_series(0, 2) g, generate_series(0, %d) p`, parts/3-1),
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var ids []repo.PartitionID
	for g := 0; g < 3; g++ {
		for p := int32(0); p < parts/3; p++ {
			ids = append(ids, repo.PartitionID{Mirror: "m", Topic: fmt.Sprint("t", g), Partition: p})
		}
	}
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)
	shuffled := slices.Clone(ids)
	for i := range shuffled {
		j := (i * 7919) % len(shuffled)
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	}
	checkpoints := func(order []repo.PartitionID, n int64) error {
		cps := make([]repo.Checkpoint, len(order))
		for i, id := range order {
			cps[i] = repo.Checkpoint{Mirror: id.Mirror, Topic: id.Topic, Partition: id.Partition, Epoch: 1,
				SrcNext: n, DstNext: n, SourceEnd: -1, DestinationEnd: -1}
		}
		_, err := repo.CheckpointsSave(ctx, pool, "a", cps)
		return err
	}
	ends := func(order []repo.PartitionID, n int64) error {
		es := make([]repo.EndOffsets, len(order))
		for i, id := range order {
			es[i] = repo.EndOffsets{ID: id, Epoch: 1, SourceEnd: n, DestinationEnd: n}
		}
		_, err := repo.PartitionsSetEnds(ctx, pool, "a", es)
		return err
	}
	writers := map[string]func(n int64) error{
		"checkpoints ascending":  func(n int64) error { return checkpoints(ids, n) },
		"checkpoints descending": func(n int64) error { return checkpoints(reversed, n) },
		"end offsets shuffled":   func(n int64) error { return ends(shuffled, n) },
		"end offsets descending": func(n int64) error { return ends(reversed, n+1) },
	}
	until := time.Now().Add(3 * time.Second)
	var mu sync.Mutex
	done := map[string]int{}
	var wg sync.WaitGroup
	for name, write := range writers {
		wg.Go(func() {
			for n := int64(1); time.Now().Before(until); n++ {
				err := write(n)
				var pe *pgconn.PgError
				if errors.As(err, &pe) && pe.Code == "40P01" {
					t.Errorf("%s: deadlock: %v", name, err)
					return
				} else if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				done[name]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for name := range writers {
		if done[name] == 0 {
			t.Errorf("%s never completed a write", name)
		}
	}
	t.Logf("bulk writes of %d rows completed without a deadlock: %v", parts, done)
}

// TestSetEndsSkipsBusyRows: the offsets refresher does not wait for a row
// another transaction holds; it reports which partitions now store the
// given ends, so the busy one is sent again next time.
func TestSetEndsSkipsBusyRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	for _, sql := range []string{
		`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('a', 1, now() + interval '1 hour')`,
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 't', 'mirroring')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state, lease_owner, lease_epoch, lease_session, source_end_offset)
			SELECT 'm', 't', p, 'PAUSED', 'a', 1, 1, 7 FROM generate_series(0, 2) p`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	id := func(p int32) repo.PartitionID { return repo.PartitionID{Mirror: "m", Topic: "t", Partition: p} }
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM mirror_partitions WHERE partition = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stored, err := repo.PartitionsSetEnds(wctx, pool, "a", []repo.EndOffsets{
		{ID: id(0), Epoch: 1, SourceEnd: 9, DestinationEnd: -1}, // changes
		{ID: id(1), Epoch: 1, SourceEnd: 9, DestinationEnd: -1}, // changes, but busy
		{ID: id(2), Epoch: 1, SourceEnd: 7, DestinationEnd: -1}, // already stored
	})
	if err != nil {
		t.Fatalf("with a row locked elsewhere: %v", err)
	}
	if !stored[id(0)] || stored[id(1)] || !stored[id(2)] || len(stored) != 2 {
		t.Errorf("stored %v, want partitions 0 and 2", stored)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var ends []int64
	rows, err := pool.Query(ctx, `SELECT source_end_offset FROM mirror_partitions ORDER BY partition`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e int64
		if err := rows.Scan(&e); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, e)
	}
	if !slices.Equal(ends, []int64{9, 7, 7}) {
		t.Errorf("stored source ends %v, want [9 7 7]", ends)
	}
}
