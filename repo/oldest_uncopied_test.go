package repo_test

import (
	"context"
	"testing"
	"time"

	"kmirror/repo"
)

// TestOldestUncopiedWrites: the oldest uncopied record is stored only for
// the checkpoint it was read for, by the end offsets' statement (which
// returns each partition's src_next) and by a checkpoint save; lag_ms
// reads it from the database's clock, 0 when caught up or when no data
// record lay below the end, and nil when it was read for another offset.
func TestOldestUncopiedWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := fenceWorld(t) // partition 0: owner a, epoch 2, src_next 10
	id := repo.PartitionID{Mirror: "m", Topic: "t", Partition: 0}
	lagMs := func() *int64 {
		t.Helper()
		p, err := repo.PartitionsGet(ctx, pool, "m", "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.LagMs
	}
	hourAgo := time.Now().Add(-time.Hour)
	ends := func(src int64, at *time.Time) map[repo.PartitionID]int64 {
		t.Helper()
		var o *repo.OldestUncopied
		if src >= 0 {
			o = &repo.OldestUncopied{Src: src, At: at}
		}
		next, err := repo.PartitionsSetEndsNext(ctx, pool, "a", []repo.EndOffsets{{ID: id, Epoch: 2, SourceEnd: 15,
			DestinationEnd: -1, Oldest: o}})
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	if next := ends(-1, nil); next[id] != 10 {
		t.Fatalf("src_next returned %v, want 10", next)
	}
	if l := lagMs(); l != nil {
		t.Fatalf("lag_ms %v before any oldest record was read, want unknown", *l)
	}
	// Read for an offset the checkpoint has left: not written.
	ends(9, &hourAgo)
	if l := lagMs(); l != nil {
		t.Fatalf("lag_ms %v from a read for another offset, want unknown", *l)
	}
	ends(10, &hourAgo)
	if l := lagMs(); l == nil || *l < time.Hour.Milliseconds() || *l > (time.Hour+time.Minute).Milliseconds() {
		t.Fatalf("lag_ms %v, want about an hour", l)
	}
	// No data record between src_next and the end: nothing to lose.
	ends(10, nil)
	if l := lagMs(); l == nil || *l != 0 {
		t.Fatalf("lag_ms %v with only markers behind, want 0", l)
	}
	// A checkpoint that moves on leaves the stored record behind (unknown)
	// unless it carries its own; one at the end reads 0.
	at := time.Now().Add(-time.Minute)
	if _, err := repo.CheckpointsSave(ctx, pool, "a", []repo.Checkpoint{{Mirror: "m", Topic: "t", Partition: 0,
		Epoch: 2, SrcNext: 12, DstNext: 12, SourceEnd: -1, DestinationEnd: -1}}); err != nil {
		t.Fatal(err)
	}
	if l := lagMs(); l != nil {
		t.Fatalf("lag_ms %v after the checkpoint moved, want unknown", *l)
	}
	if _, err := repo.CheckpointsSave(ctx, pool, "a", []repo.Checkpoint{{Mirror: "m", Topic: "t", Partition: 0,
		Epoch: 2, SrcNext: 13, DstNext: 13, SourceEnd: -1, DestinationEnd: -1, Oldest: &repo.OldestUncopied{Src: 13, At: &at}}}); err != nil {
		t.Fatal(err)
	}
	if l := lagMs(); l == nil || *l < time.Minute.Milliseconds() || *l > 2*time.Minute.Milliseconds() {
		t.Fatalf("lag_ms %v from the checkpoint's oldest record, want about a minute", l)
	}
	// A STOPPED partition (its topic removed, failed over) has none.
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET state = 'STOPPED' WHERE partition = 0`); err != nil {
		t.Fatal(err)
	}
	if l := lagMs(); l != nil {
		t.Fatalf("lag_ms %v once STOPPED, want none", *l)
	}
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET state = 'PREPARING' WHERE partition = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CheckpointsSave(ctx, pool, "a", []repo.Checkpoint{{Mirror: "m", Topic: "t", Partition: 0,
		Epoch: 2, SrcNext: 15, DstNext: 15, SourceEnd: 15, DestinationEnd: -1}}); err != nil {
		t.Fatal(err)
	}
	if l := lagMs(); l == nil || *l != 0 {
		t.Fatalf("lag_ms %v when caught up, want 0", l)
	}
	// Another owner's statement writes nothing.
	if next, err := repo.PartitionsSetEndsNext(ctx, pool, "b", []repo.EndOffsets{{ID: id, Epoch: 2, SourceEnd: 20,
		DestinationEnd: -1, Oldest: &repo.OldestUncopied{Src: 15, At: &hourAgo}}}); err != nil || len(next) != 0 {
		t.Fatalf("another owner's write: %v, %v", next, err)
	}
}
