package partition

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAckedBytesAreExact: the promise publishes a batch's bytes once, at its
// last record or at the first failure, and the worker counts every verified
// byte exactly once: when acknowledgements arrive mid-batch, when the worker
// has produced the next batch before the last result of the previous one
// arrives, and when a copy fails.
func TestAckedBytesAreExact(t *testing.T) {
	rec := func(off int64, size int) *kgo.Record {
		return &kgo.Record{Offset: off, Value: make([]byte, size)}
	}
	s := &mirrorSession{acks: newProduceAcks(10), produced: 10}
	produce := func(n int64) { // the worker's side of handleBatch
		s.pending = append(s.pending, pendingRun{src: s.produced, dst: s.produced, n: n})
		s.acks.producedEnd.Store(s.produced + n)
		s.produced += n
	}

	produce(3) // offsets 10..12, 1+2+3 bytes
	s.acks.promise(rec(10, 1), nil)
	s.handleAcks() // mid-batch: the record counts, its bytes wait for the batch
	if s.taken != 1 || s.countedBytes != 0 {
		t.Fatalf("mid-batch: taken %d, bytes %d", s.taken, s.countedBytes)
	}
	s.acks.promise(rec(11, 2), nil)
	produce(2) // offsets 13..14 before the result of 12 arrives
	s.acks.promise(rec(12, 3), nil)
	s.handleAcks()
	if s.taken != 3 || s.countedBytes != 0 {
		t.Fatalf("a later batch produced: taken %d, bytes %d (published with the later batch)", s.taken, s.countedBytes)
	}
	s.acks.promise(rec(13, 4), nil)
	s.acks.promise(rec(14, 5), nil)
	s.handleAcks()
	if s.taken != 5 || s.countedBytes != 15 {
		t.Fatalf("every batch settled: taken %d, bytes %d, want 15", s.taken, s.countedBytes)
	}

	produce(3) // offsets 15..17: 15 lands, 16 fails, 17 is never verified
	s.acks.promise(rec(15, 6), nil)
	s.acks.promise(rec(16, 7), errors.New("broker down"))
	s.acks.promise(rec(17, 8), nil)
	s.handleAcks()
	if s.taken != 6 || s.countedBytes != 21 || s.failure == nil {
		t.Fatalf("after a failure: taken %d, bytes %d (want 21), failure %v", s.taken, s.countedBytes, s.failure)
	}
}
