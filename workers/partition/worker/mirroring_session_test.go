package worker

import (
	"errors"
	"testing"

	"kmirror/workers/partition/produce"
)

// TestAckedBytesAreExact: the promise publishes results in runs, at the
// last record produced so far, every produce.PublishEvery results and at the first
// failure, with their bytes, and the worker counts every verified record
// and byte exactly once: when results arrive mid-batch, when the worker has
// produced the next batch before the last result of the previous one
// arrives, over a long batch, and when a copy fails.
func TestAckedBytesAreExact(t *testing.T) {
	s := &Session{acks: produce.NewAcks(10, nil, nil), produced: 10}
	produceRun := func(n int64) { // the worker's side of handleBatch
		s.pending = append(s.pending, pendingRun{src: s.produced, dst: s.produced, n: n})
		s.acks.SetProducedEnd(s.produced + n)
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

	produceRun(3) // offsets 10..12, 1+2+3 bytes
	s.acks.PromiseBatch(1, 1, 10, nil)
	check("mid-batch: nothing published yet", 0, 0, 3)
	s.acks.PromiseBatch(1, 2, 11, nil)
	produceRun(2) // offsets 13..14 before the result of 12 arrives
	s.acks.PromiseBatch(1, 3, 12, nil)
	check("a later batch produced: 12 is not the last record produced", 0, 0, 5)
	s.acks.PromiseBatch(1, 4, 13, nil)
	s.acks.PromiseBatch(1, 5, 14, nil)
	check("every batch settled", 5, 15, 0)

	// A long batch: the session's produce.PublishEvery-th result publishes (five
	// came before the batch), then its last record.
	produceRun(produce.PublishEvery + 1) // offsets 15..15+produce.PublishEvery, 1 byte each
	for i := range int64(produce.PublishEvery - 5) {
		s.acks.PromiseBatch(1, 1, 15+i, nil)
	}
	check("the session's produce.PublishEvery-th result", produce.PublishEvery, 10+produce.PublishEvery, 6)
	for i := int64(produce.PublishEvery - 5); i <= produce.PublishEvery; i++ {
		s.acks.PromiseBatch(1, 1, 15+i, nil)
	}
	check("the long batch settled", 6+produce.PublishEvery, 16+produce.PublishEvery, 0)

	base := s.produced
	produceRun(3) // the first lands, the second fails, the third is never verified
	s.acks.PromiseBatch(1, 6, base, nil)
	s.acks.PromiseBatch(1, 7, base+1, errors.New("broker down"))
	if s.handleAcks(); s.taken != 7+produce.PublishEvery || s.countedBytes != 22+produce.PublishEvery || s.failure == nil {
		t.Fatalf("at the failure: taken %d, bytes %d, failure %v", s.taken, s.countedBytes, s.failure)
	}
	s.acks.PromiseBatch(1, 8, base+2, nil)
	check("after the failure, every result in", 7+produce.PublishEvery, 22+produce.PublishEvery, 0)
}
