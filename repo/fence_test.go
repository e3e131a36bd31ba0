package repo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// fenceWorld is one mirror topic with two partitions: partition 0 leased by
// "a" at epoch 2 (the stale fence is epoch 1), both with a checkpoint and
// an offset-map run.
func fenceWorld(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testdb.Pool(t)
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state, recreate) VALUES ('m', 't', 'mirroring', true)`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state, src_next, dst_next, lease_owner, lease_epoch, lease_session)
		 VALUES ('m', 't', 0, 'PREPARING', 10, 10, 'a', 2, 1),
		        ('m', 't', 1, 'MIRRORING', 20, 20, 'b', 5, 1)`,
		`INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
		 VALUES ('m', 't', 0, 0, 0, 10), ('m', 't', 1, 0, 0, 20)`,
	} {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// snapshot is everything a fenced write may change, as text.
func snapshot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(format('%s/%s rec=%s ro=%s id=%s', mirror, topic, recreate, read_only_enforced, source_topic_id), ';') FROM mirror_topics) || ' | ' ||
		(SELECT string_agg(format('%s src=%s dst=%s dend=%s', partition, src_next, dst_next, destination_end_offset), ';' ORDER BY partition) FROM mirror_partitions) || ' | ' ||
		coalesce((SELECT string_agg(format('%s:%s+%s', partition, dst_start, count), ';' ORDER BY partition, src_start) FROM offset_map_runs), '')`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFencedWorkerWritesIgnoreAStaleEpoch: every write a partition worker
// makes outside its own state row carries its lease; at a stale epoch (or
// another owner) it changes nothing, at the current one it does.
func TestFencedWorkerWritesIgnoreAStaleEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := []byte("0123456789abcdef")
	writes := map[string]func(q repo.DBTX, f repo.LeaseFence) error{
		"TopicsRecordSourceID": func(q repo.DBTX, f repo.LeaseFence) error {
			_, err := repo.TopicsRecordSourceID(ctx, q, f, id)
			return err
		},
		"TopicsSetReadOnlyEnforced": func(q repo.DBTX, f repo.LeaseFence) error {
			return repo.TopicsSetReadOnlyEnforced(ctx, q, f, true)
		},
		"TopicsResetForRecreate": func(q repo.DBTX, f repo.LeaseFence) error {
			return repo.TopicsResetForRecreate(ctx, q, f)
		},
		"OffsetRunsTruncate": func(q repo.DBTX, f repo.LeaseFence) error {
			return repo.OffsetRunsTruncate(ctx, q, f, 4)
		},
		"OffsetRunsDelete": func(q repo.DBTX, f repo.LeaseFence) error {
			return repo.OffsetRunsDelete(ctx, q, f)
		},
	}
	current := repo.LeaseFence{Mirror: "m", Topic: "t", Partition: 0, Owner: "a", Epoch: 2}
	stale := []repo.LeaseFence{
		{Mirror: "m", Topic: "t", Partition: 0, Owner: "a", Epoch: 1},
		{Mirror: "m", Topic: "t", Partition: 0, Owner: "z", Epoch: 2},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := fenceWorld(t)
			before := snapshot(t, pool)
			for _, f := range stale {
				err := write(pool, f)
				if err != nil && !errors.Is(err, repo.ErrNotFound) {
					t.Fatalf("stale fence %+v: %v", f, err)
				}
				if got := snapshot(t, pool); got != before {
					t.Fatalf("stale fence %+v wrote:\nbefore %s\nafter  %s", f, before, got)
				}
			}
			if err := write(pool, current); err != nil {
				t.Fatalf("current fence: %v", err)
			}
			if got := snapshot(t, pool); got == before {
				t.Fatalf("current fence wrote nothing: %s", got)
			}
		})
	}
}

// TestPartitionWritesIgnoreAStaleEpoch covers the fenced writes of the
// partition row itself: state changes, checkpoints and end offsets.
func TestPartitionWritesIgnoreAStaleEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := fenceWorld(t)
	before := snapshot(t, pool)
	for _, epoch := range []int64{1, 3} {
		_, err := repo.PartitionsTransition(ctx, pool, repo.PartitionsSetStateParams{Mirror: "m", Topic: "t", Partition: 0,
			Owner: "a", Epoch: epoch, From: "PREPARING", To: "MIRRORING"},
			repo.Event{Kind: "partition.state", Message: "stale"}, "partition/m/t/0", 1)
		if !errors.Is(err, repo.ErrNotFound) {
			t.Fatalf("state write at epoch %d: %v, want ErrNotFound", epoch, err)
		}
		var written int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events WHERE message = 'stale') + (SELECT count(*) FROM outbox WHERE key = 'partition/m/t/0')`).Scan(&written); err != nil || written != 0 {
			t.Fatalf("a refused state write at epoch %d left %d event or outbox rows (%v)", epoch, written, err)
		}
		saved, err := repo.CheckpointsSave(ctx, pool, "a", []repo.Checkpoint{{Mirror: "m", Topic: "t", Partition: 0,
			Epoch: epoch, SrcNext: 99, DstNext: 99, SourceEnd: -1, DestinationEnd: -1}})
		if err != nil || len(saved) != 0 {
			t.Fatalf("checkpoint at epoch %d: saved %v, %v", epoch, saved, err)
		}
		if stored, err := repo.PartitionsSetEnds(ctx, pool, "a", []repo.EndOffsets{{ID: repo.PartitionID{Mirror: "m", Topic: "t", Partition: 0},
			Epoch: epoch, SourceEnd: 500, DestinationEnd: 500}}); err != nil || len(stored) != 0 {
			t.Fatalf("ends at epoch %d: stored %v, %v", epoch, stored, err)
		}
	}
	if got := snapshot(t, pool); got != before {
		t.Fatalf("a stale epoch wrote:\nbefore %s\nafter  %s", before, got)
	}
	var state string
	var srcEnd *int64
	if err := pool.QueryRow(ctx, `SELECT state, source_end_offset FROM mirror_partitions WHERE partition = 0`).Scan(&state, &srcEnd); err != nil {
		t.Fatal(err)
	}
	if state != "PREPARING" || srcEnd != nil {
		t.Fatalf("state %s, source end %v after stale writes", state, fmt.Sprint(srcEnd))
	}
}

// TestTopicWritesSkipUnchangedValues: each partition of a topic records its
// source topic id and read-only state as it prepares; after the first,
// those calls read the row instead of rewriting (and locking) it.
func TestTopicWritesSkipUnchangedValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := fenceWorld(t)
	version := func() string {
		t.Helper()
		var v string
		if err := pool.QueryRow(ctx, `SELECT xmin::text FROM mirror_topics`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	p0 := repo.LeaseFence{Mirror: "m", Topic: "t", Partition: 0, Owner: "a", Epoch: 2}
	p1 := repo.LeaseFence{Mirror: "m", Topic: "t", Partition: 1, Owner: "b", Epoch: 5}
	id, other := []byte("0123456789abcdef"), []byte("fedcba9876543210")

	if stored, err := repo.TopicsRecordSourceID(ctx, pool, p0, id); err != nil || string(stored) != string(id) {
		t.Fatalf("first record: %q, %v", stored, err)
	}
	v := version()
	if stored, err := repo.TopicsRecordSourceID(ctx, pool, p1, other); err != nil || string(stored) != string(id) {
		t.Fatalf("a later partition seeing another id: %q, %v; want the stored %q", stored, err, id)
	}
	if err := repo.TopicsSetReadOnlyEnforced(ctx, pool, p0, true); err != nil {
		t.Fatal(err)
	}
	if version() == v {
		t.Fatal("read_only_enforced NULL → true was not written")
	}
	v = version()
	if err := repo.TopicsSetReadOnlyEnforced(ctx, pool, p1, true); err != nil {
		t.Fatal(err)
	}
	if version() != v {
		t.Error("an unchanged read_only_enforced rewrote the topic's row")
	}
	if err := repo.TopicsSetReadOnlyEnforced(ctx, pool, p1, false); err != nil {
		t.Fatal(err)
	}
	if version() == v {
		t.Error("read_only_enforced true → false was not written")
	}
	stale := repo.LeaseFence{Mirror: "m", Topic: "t", Partition: 1, Owner: "b", Epoch: 4}
	if err := repo.TopicsSetReadOnlyEnforced(ctx, pool, stale, false); !errors.Is(err, repo.ErrNotFound) {
		t.Errorf("stale fence, unchanged value: %v, want ErrNotFound", err)
	}
	if _, err := repo.TopicsRecordSourceID(ctx, pool, stale, id); !errors.Is(err, repo.ErrNotFound) {
		t.Errorf("stale fence, recorded id: %v, want ErrNotFound", err)
	}
}

// Sibling partitions prepare at once, and each finds the topic's row
// without the value yet: the one whose write waited on another's row lock
// must then leave the row as that write left it, not write it again (else
// a dozen such writes run one after another on a new topic).
func TestTopicWritesWaitingOnASiblingDoNotRewrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := fenceWorld(t)
	p0 := repo.LeaseFence{Mirror: "m", Topic: "t", Partition: 0, Owner: "a", Epoch: 2}
	p1 := repo.LeaseFence{Mirror: "m", Topic: "t", Partition: 1, Owner: "b", Epoch: 5}
	id, other := []byte("0123456789abcdef"), []byte("fedcba9876543210")
	for _, c := range []struct {
		name              string
		first, concurrent func(repo.DBTX) error
	}{
		{"source topic id",
			func(q repo.DBTX) error { _, err := repo.TopicsRecordSourceID(ctx, q, p0, id); return err },
			func(q repo.DBTX) error {
				stored, err := repo.TopicsRecordSourceID(ctx, q, p1, other)
				if err == nil && string(stored) != string(id) {
					return fmt.Errorf("got id %q, want the first write's %q", stored, id)
				}
				return err
			}},
		{"read-only enforced",
			func(q repo.DBTX) error { return repo.TopicsSetReadOnlyEnforced(ctx, q, p0, true) },
			func(q repo.DBTX) error { return repo.TopicsSetReadOnlyEnforced(ctx, q, p1, true) }},
	} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.first(tx); err != nil {
			t.Fatal(c.name, err)
		}
		done := make(chan error, 1)
		go func() { done <- c.concurrent(pool) }()
		// The sibling's write waits on the first one's row lock.
		for waiting, deadline := 0, time.Now().Add(5*time.Second); waiting != 1; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d sessions waiting on a lock after 5 s, want the sibling's", c.name, waiting)
			}
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The row version the first write made (its transaction's id).
		var first string
		if err := tx.QueryRow(ctx, `SELECT xmin::text FROM mirror_topics`).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(c.name, err)
		}
		var after string
		if err := pool.QueryRow(ctx, `SELECT xmin::text FROM mirror_topics`).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if after != first {
			t.Errorf("%s: the sibling rewrote the topic's row after the first write", c.name)
		}
	}
}
