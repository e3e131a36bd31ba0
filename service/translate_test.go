package service

import (
	"testing"

	"kmirror/repo"
)

func TestTranslateOffset(t *testing.T) {
	// Source 10..19 → dst 0..9; source 25..29 (after aborted records) → dst 10..14.
	r1 := &repo.OffsetRun{SrcStart: 10, DstStart: 0, Count: 10}
	r2 := &repo.OffsetRun{SrcStart: 25, DstStart: 10, Count: 5}
	cases := []struct {
		name          string
		n             int64
		before, after *repo.OffsetRun
		want          int64
		exact, ok     bool
	}{
		{"nothing mapped", 5, nil, nil, 0, false, false},
		{"before the first run", 3, nil, r1, 0, false, true},
		{"first record", 10, r1, r2, 0, true, true},
		{"inside a run", 15, r1, r2, 5, true, true},
		{"just past a run, in a gap", 20, r1, r2, 10, false, true},
		{"deep in the gap", 24, r1, r2, 10, false, true},
		{"start of the next run", 25, r2, nil, 10, true, true},
		{"inside the last run", 27, r2, nil, 12, true, true},
		{"end of what is mirrored", 30, r2, nil, 15, false, true},
		{"far past the end never overshoots", 1000, r2, nil, 15, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := translateOffset(c.n, c.before, c.after)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if got.DestinationOffset != c.want || got.Exact != c.exact {
				t.Fatalf("translate(%d) = %d exact=%v, want %d exact=%v", c.n, got.DestinationOffset, got.Exact, c.want, c.exact)
			}
		})
	}
}
