package batchfetch

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"kmirror/internal/kafka/leaders"
	"kmirror/internal/kafka/recordbatch"
)

// batches returns n batches of size bytes and one record each, from
// offset 0.
func batches(n, size int) []recordbatch.Batch {
	out := make([]recordbatch.Batch, n)
	for i := range out {
		out[i] = recordbatch.Batch{Raw: make([]byte, size), BaseOffset: int64(i), Magic: 2}
	}
	return out
}

// TestSplitCutsAtSize: runs hold whole batches up to the size, a batch
// larger than the size goes alone, and every batch is in one run, in
// order.
func TestSplitCutsAtSize(t *testing.T) {
	in := append(batches(5, 100), recordbatch.Batch{Raw: make([]byte, 400), BaseOffset: 5, Magic: 2})
	runs := split(Fetched{Batches: in, LastStableOffset: 6}, 250)
	var sizes [][]int
	var next int64
	for _, r := range runs {
		var s []int
		for _, b := range r.Batches {
			if b.BaseOffset != next {
				t.Fatalf("a run holds offset %d, want %d", b.BaseOffset, next)
			}
			next = b.NextOffset()
			s = append(s, len(b.Raw))
		}
		if r.LastStableOffset != 6 {
			t.Fatalf("a run has last stable offset %d, want the response's 6", r.LastStableOffset)
		}
		sizes = append(sizes, s)
	}
	if want := "[[100 100] [100 100] [100] [400]]"; fmt.Sprint(sizes) != want {
		t.Fatalf("runs of %v bytes, want %s", sizes, want)
	}
	if next != 6 {
		t.Fatalf("the runs end at %d, want 6", next)
	}
}

// TestDeliverInTurns: the partitions of a response are handed a piece
// each in turn, and a partition removed between two of its pieces gets
// no more.
func TestDeliverInTurns(t *testing.T) {
	f := &Fetcher{parts: map[leaders.TopicPartition]*partition{}, unassigned: map[leaders.TopicPartition]*partition{}}
	f.cond = sync.NewCond(&f.mu)
	b := &brokerLoop{f: f}
	var mu sync.Mutex
	var order []string
	var turns []*pieces
	for i, n := range []int{3, 2, 4} {
		tp := leaders.TopicPartition{Topic: "t", Partition: int32(i)}
		p := &partition{tp: tp, broker: -1}
		p.deliver = func(out Fetched) {
			mu.Lock()
			order = append(order, fmt.Sprintf("%d@%d", i, out.Batches[0].BaseOffset))
			mu.Unlock()
			if i == 0 && out.Batches[0].BaseOffset == 1 {
				// Partition 2 is removed from another goroutine while
				// partition 0 is being delivered.
				done := make(chan struct{})
				go func() { f.Remove("t", 2); close(done) }()
				<-done
			}
		}
		f.parts[tp] = p
		turns = append(turns, &pieces{p: p, tp: tp, rest: split(Fetched{Batches: batches(n, 10)}, 10)})
	}
	b.deliverInTurns(turns)
	want := []string{"0@0", "1@0", "2@0", "0@1", "1@1", "0@2"}
	if !slices.Equal(order, want) {
		t.Fatalf("delivered %v, want %v", order, want)
	}
}
