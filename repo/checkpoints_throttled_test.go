package repo_test

import (
	"context"
	"testing"

	"kmirror/repo"
)

// TestCheckpointsSaveThrottledMs: a checkpoint stores the partition's
// throttled time, a save of a smaller one (an older checkpoint, saved
// late) keeps the larger, every partition read returns it, a state change
// keeps it, and MirrorsStatus sums it.
func TestCheckpointsSaveThrottledMs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := fenceWorld(t)
	save := func(owner string, partition int32, epoch, dstNext, throttled int64) {
		t.Helper()
		saved, err := repo.CheckpointsSave(ctx, pool, owner, []repo.Checkpoint{{Mirror: "m", Topic: "t", Partition: partition,
			Epoch: epoch, SrcNext: dstNext, DstNext: dstNext, SourceEnd: -1, DestinationEnd: -1, ThrottledMs: throttled}})
		if err != nil || len(saved) != 1 {
			t.Fatalf("save of %d: saved %v, %v", partition, saved, err)
		}
	}
	// reads returns partition 0's throttled_ms as each read of a
	// partition row scans it.
	reads := func(want int64) {
		t.Helper()
		got := map[string]int64{}
		p, err := repo.PartitionsGet(ctx, pool, "m", "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		got["PartitionsGet"] = p.ThrottledMs
		list, err := repo.PartitionsList(ctx, pool, repo.PartitionsListParams{Mirror: "m"})
		if err != nil || len(list) != 2 {
			t.Fatalf("list %v, %v", list, err)
		}
		got["PartitionsList"] = list[0].ThrottledMs
		many, err := repo.PartitionsGetMany(ctx, pool, []repo.PartitionID{{Mirror: "m", Topic: "t", Partition: 0}})
		if err != nil || len(many) != 1 {
			t.Fatalf("get many %v, %v", many, err)
		}
		got["PartitionsGetMany"] = many[0].ThrottledMs
		for read, ms := range got {
			if ms != want {
				t.Errorf("%s: throttled_ms %d, want %d", read, ms, want)
			}
		}
	}

	reads(0)
	save("a", 0, 2, 12, 1500)
	reads(1500)
	// An older checkpoint, saved after the newer one, moves neither the
	// checkpoint nor the throttled time back.
	save("a", 0, 2, 11, 700)
	reads(1500)
	if p, err := repo.PartitionsGet(ctx, pool, "m", "t", 0); err != nil || *p.DstNext != 12 {
		t.Fatalf("dst_next %v after an older checkpoint, want 12 (%v)", *p.DstNext, err)
	}
	save("a", 0, 2, 13, 2500)
	reads(2500)
	// A save at a stale epoch writes nothing.
	if saved, err := repo.CheckpointsSave(ctx, pool, "a", []repo.Checkpoint{{Mirror: "m", Topic: "t", Partition: 0,
		Epoch: 1, SrcNext: 14, DstNext: 14, SourceEnd: -1, DestinationEnd: -1, ThrottledMs: 9000}}); err != nil || len(saved) != 0 {
		t.Fatalf("stale save: saved %v, %v", saved, err)
	}
	reads(2500)

	// A state change (which writes the checkpoint too) keeps it, and its
	// returned row carries it.
	src, dst := int64(13), int64(13)
	p, err := repo.PartitionsTransition(ctx, pool, repo.PartitionsSetStateParams{Mirror: "m", Topic: "t", Partition: 0,
		Owner: "a", Epoch: 2, From: "PREPARING", To: "MIRRORING", SrcNext: &src, DstNext: &dst},
		repo.Event{Kind: "partition.state", Message: "mirroring"}, "partition/m/t/0", 1)
	if err != nil || p.ThrottledMs != 2500 {
		t.Fatalf("transition: throttled_ms %d, want 2500 (%v)", p.ThrottledMs, err)
	}
	reads(2500)

	save("b", 1, 5, 21, 300)
	st, err := repo.MirrorsStatus(ctx, pool, "m")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range st {
		sum += c.ThrottledMs
	}
	if sum != 2800 {
		t.Fatalf("MirrorsStatus throttled_ms sums to %d, want 2800: %+v", sum, st)
	}
}
