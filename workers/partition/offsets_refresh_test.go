package partition

import (
	"slices"
	"testing"

	"kmirror/repo"
	"kmirror/workers/lease"
)

func TestChangedEnds(t *testing.T) {
	end := func(p int32, epoch, src, dst int64) repo.EndOffsets {
		return repo.EndOffsets{ID: repo.PartitionID{Mirror: "m", Topic: "t", Partition: p}, Epoch: epoch, SourceEnd: src, DestinationEnd: dst}
	}
	saved := map[lease.Key]repo.EndOffsets{}
	remember := func(os []repo.EndOffsets) {
		for _, o := range os {
			saved[keyOf(o.ID)] = o
		}
	}
	parts := func(os []repo.EndOffsets) []int32 {
		var ps []int32
		for _, o := range os {
			ps = append(ps, o.ID.Partition)
		}
		return ps
	}

	first := []repo.EndOffsets{end(0, 1, 10, 10), end(1, 1, 5, -1), end(2, 1, -1, -1)}
	got := changedEnds(saved, first, false)
	if !slices.Equal(parts(got), []int32{0, 1, 2}) {
		t.Fatalf("first refresh sent %v, want every partition", parts(got))
	}
	remember(got)

	for _, c := range []struct {
		name string
		ends []repo.EndOffsets
		full bool
		want []int32
	}{
		{"nothing moved", []repo.EndOffsets{end(0, 1, 10, 10), end(1, 1, 5, -1), end(2, 1, -1, -1)}, false, nil},
		{"an unknown end is no change", []repo.EndOffsets{end(0, 1, -1, -1), end(1, 1, 5, -1), end(2, 1, -1, -1)}, false, nil},
		{"a source end moved", []repo.EndOffsets{end(0, 1, 11, 10), end(1, 1, 5, -1), end(2, 1, -1, -1)}, false, []int32{0}},
		{"a destination end became known", []repo.EndOffsets{end(0, 1, 10, 10), end(1, 1, 5, 5), end(2, 1, -1, -1)}, false, []int32{1}},
		{"a new epoch", []repo.EndOffsets{end(0, 1, 10, 10), end(1, 1, 5, -1), end(2, 2, -1, -1)}, false, []int32{2}},
		{"a full refresh", []repo.EndOffsets{end(0, 1, 10, 10), end(1, 1, 5, -1), end(2, 1, -1, -1)}, true, []int32{0, 1, 2}},
	} {
		if got := parts(changedEnds(saved, c.ends, c.full)); !slices.Equal(got, c.want) {
			t.Errorf("%s: sent %v, want %v", c.name, got, c.want)
		}
	}

	// A partition no longer held is forgotten, so a later lease of it is
	// sent in full.
	forgetReleased(saved, []lease.Key{{Mirror: "m", Topic: "t", Partition: 0}})
	if _, ok := saved[lease.Key{Mirror: "m", Topic: "t", Partition: 1}]; ok || len(saved) != 1 {
		t.Errorf("saved after partitions 1 and 2 left: %v", saved)
	}
}
