package repo_test

import (
	"context"
	"slices"
	"testing"

	"kmirror/repo"
)

// TestOffsetRunsListFrom: each partition's runs are read from the chunk of
// its run at or before the asked offset (from 0 with none, or when asked for
// everything), partitions without runs included, in one statement.
func TestOffsetRunsListFrom(t *testing.T) {
	t.Parallel()
	pool := fenceWorld(t) // partitions 0 and 1, each with one run from 0
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO mirror_partitions (mirror, topic, partition) VALUES ('m', 't', 2);
		INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
		VALUES ('m', 't', 0, 105, 10, 5), ('m', 't', 0, 230, 15, 1), ('m', 't', 0, 310, 16, 4)`); err != nil {
		t.Fatal(err)
	}
	const width = 100
	p0, p1, p2 := repo.PartitionID{Mirror: "m", Topic: "t", Partition: 0}, repo.PartitionID{Mirror: "m", Topic: "t", Partition: 1},
		repo.PartitionID{Mirror: "m", Topic: "t", Partition: 2}
	got, err := repo.OffsetRunsListFrom(ctx, pool, []repo.OffsetRunsFrom{{ID: p0, Src: 250}, {ID: p1, Src: -1}, {ID: p2, Src: 7}}, width)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 0: the run at or before 250 starts at 230, in chunk 2.
	want0 := []repo.OffsetRun{{SrcStart: 230, DstStart: 15, Count: 1}, {SrcStart: 310, DstStart: 16, Count: 4}}
	if r := got[p0]; r.FromSrc != 200 || !slices.Equal(r.Runs, want0) {
		t.Fatalf("partition 0: %+v", r)
	}
	if r := got[p1]; r.FromSrc != 0 || len(r.Runs) != 1 || r.Runs[0].Count != 20 {
		t.Fatalf("partition 1: %+v", r)
	}
	if r, ok := got[p2]; !ok || r.FromSrc != 0 || len(r.Runs) != 0 {
		t.Fatalf("partition 2 (no runs): %+v %v", r, ok)
	}
	// Before the first run: from 0.
	got, err = repo.OffsetRunsListFrom(ctx, pool, []repo.OffsetRunsFrom{{ID: p0, Src: 104}}, width)
	if err != nil {
		t.Fatal(err)
	}
	if r := got[p0]; r.FromSrc != 0 || len(r.Runs) != 4 {
		t.Fatalf("partition 0 from 104: %+v", r)
	}
	parts, err := repo.PartitionsGetMany(ctx, pool, []repo.PartitionID{p2, p0, {Mirror: "m", Topic: "t", Partition: 9}})
	if err != nil || len(parts) != 2 || parts[0].Partition != 0 || parts[1].Partition != 2 {
		t.Fatalf("PartitionsGetMany: %+v %v", parts, err)
	}
}
