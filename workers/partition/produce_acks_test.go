package partition

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAckedBytesAreExact: the promise publishes results in runs, at the
// last record produced so far, every publishEvery results and at the first
// failure, with their bytes, and the worker counts every verified record
// and byte exactly once: when results arrive mid-batch, when the worker has
// produced the next batch before the last result of the previous one
// arrives, over a long batch, and when a copy fails.
func TestAckedBytesAreExact(t *testing.T) {
	rec := func(off int64, size int) *kgo.Record {
		return &kgo.Record{Offset: off, Value: make([]byte, size)}
	}
	s := &mirrorSession{acks: newProduceAcks(10, nil), produced: 10}
	produce := func(n int64) { // the worker's side of handleBatch
		s.pending = append(s.pending, pendingRun{src: s.produced, dst: s.produced, n: n})
		s.acks.producedEnd.Store(s.produced + n)
		s.produced += n
	}
	check := func(what string, taken, bytes, inFlight int64) {
		t.Helper()
		s.handleAcks()
		if s.taken != taken || s.countedBytes != bytes || s.inFlight() != inFlight {
			t.Fatalf("%s: taken %d, bytes %d, in flight %d; want %d, %d, %d", what,
				s.taken, s.countedBytes, s.inFlight(), taken, bytes, inFlight)
		}
	}

	produce(3) // offsets 10..12, 1+2+3 bytes
	s.acks.promise(rec(10, 1), nil)
	check("mid-batch: nothing published yet", 0, 0, 3)
	s.acks.promise(rec(11, 2), nil)
	produce(2) // offsets 13..14 before the result of 12 arrives
	s.acks.promise(rec(12, 3), nil)
	check("a later batch produced: 12 is not the last record produced", 0, 0, 5)
	s.acks.promise(rec(13, 4), nil)
	s.acks.promise(rec(14, 5), nil)
	check("every batch settled", 5, 15, 0)

	// A long batch: the session's publishEvery-th result publishes (five
	// came before the batch), then its last record.
	produce(publishEvery + 1) // offsets 15..15+publishEvery, 1 byte each
	for i := range int64(publishEvery - 5) {
		s.acks.promise(rec(15+i, 1), nil)
	}
	check("the session's publishEvery-th result", publishEvery, 10+publishEvery, 6)
	for i := int64(publishEvery - 5); i <= publishEvery; i++ {
		s.acks.promise(rec(15+i, 1), nil)
	}
	check("the long batch settled", 6+publishEvery, 16+publishEvery, 0)

	base := s.produced
	produce(3) // the first lands, the second fails, the third is never verified
	s.acks.promise(rec(base, 6), nil)
	s.acks.promise(rec(base+1, 7), errors.New("broker down"))
	if s.handleAcks(); s.taken != 7+publishEvery || s.countedBytes != 22+publishEvery || s.failure == nil {
		t.Fatalf("at the failure: taken %d, bytes %d, failure %v", s.taken, s.countedBytes, s.failure)
	}
	s.acks.promise(rec(base+2, 8), nil)
	check("after the failure, every result in", 7+publishEvery, 22+publishEvery, 0)
}
